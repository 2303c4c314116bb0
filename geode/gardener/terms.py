"""Match terms from what the agent did: the commands that were blocked, the tool inputs of
blocked Read/Grep/Glob calls, the words of its search queries.

Everything here reads ledger rows only (the agent's own actions), never a note's text. A term
is short on purpose: at most ``MAX_TERM_WORDS`` words and ``MAX_TERM_CHARS`` characters, so a
grep for a whole sentence never turns into a sentence in a proposal.

Why the tokenizer is the guard's (``geode.delivery.match.command_words``): the Gardener must read
a blocked command the way the hook read it when it blocked it.
"""

from __future__ import annotations

import json
import os
import re

from geode.delivery.guard import LOOKUP_COMMANDS
from geode.delivery.match import command_words, is_short_option
from geode.kernel.crystal import NOTE_SUFFIXES

MAX_TERM_CHARS = 40
MAX_TERM_WORDS = 3
MIN_TERM_CHARS = 3

GREP_LIKE = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git-grep"})
FIND_LIKE = frozenset({"find", "fd", "fdfind", "locate"})
READ_LIKE = frozenset({"cat", "bat", "less", "more", "head", "tail", "stat", "wc", "ls", "tree", "exa", "eza"})
#: options of grep-like commands that take a value (the value is not the pattern)
_VALUE_OPTS = frozenset(
    {
        "-f",
        "-A",
        "-B",
        "-C",
        "-m",
        "-g",
        "--glob",
        "-t",
        "--type",
        "-T",
        "--type-not",
        "--max-count",
        "--include",
        "--exclude",
        "--context",
        "-d",
        "-D",
        "--max-depth",
        "--after-context",
        "--before-context",
        "-M",
        "--max-columns",
        "-j",
        "--threads",
    }
)
_FIND_NAME_OPTS = frozenset({"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename"})
_WRAPPERS = frozenset({"sudo", "env", "command", "xargs", "nice", "time"})

#: words that say nothing about what was hunted
STOP = (
    frozenset(
        {
            "the",
            "and",
            "for",
            "with",
            "from",
            "into",
            "that",
            "this",
            "what",
            "when",
            "where",
            "which",
            "how",
            "why",
            "who",
            "does",
            "did",
            "are",
            "was",
            "were",
            "has",
            "have",
            "had",
            "not",
            "but",
            "you",
            "your",
            "can",
            "could",
            "should",
            "would",
            "will",
            "there",
            "their",
            "them",
            "then",
            "than",
            "about",
            "any",
            "all",
            "our",
            "out",
            "use",
            "used",
            "using",
            "get",
            "set",
            "one",
            "two",
            "its",
            "also",
            "just",
            "like",
            "md",
            "mdc",
            "markdown",
            "note",
            "notes",
            "store",
            "geode",
            "memory",
            "crystal",
            "crystals",
            "readme",
            "index",
            "file",
            "files",
            "todo",
            "tmp",
            "home",
            "users",
            "src",
            "docs",
            "doc",
            "txt",
        }
    )
    | LOOKUP_COMMANDS
)

_REGEX_ESCAPES = re.compile(r"\\[bBsSwWdDAZzn]")
_META = re.compile(r"[\\^$.*+?()\[\]{}|<>\"'`=,;:!@#%&~]+")
_WORD = re.compile(r"[a-z0-9][a-z0-9_.\-/]*[a-z0-9]|[a-z0-9]")
_ALLOWED = re.compile(r"[a-z0-9][a-z0-9 _./\-]*[a-z0-9]")


def fold_term(raw: str) -> str:
    """``raw`` folded the way the term grammar reads it (``geode.delivery.match``): words and long
    options lower-case, a short option as written. Why: ``-D`` and ``-d`` are different flags
    (``git branch -D`` deletes what ``-d`` refuses to), so a minted term that folded them would
    fire on the safe form and show the wrong flag."""
    return " ".join(w if is_short_option(w) else w.lower() for w in raw.split())


def clean_term(raw: str) -> str | None:
    """A usable match term (words lower-case, short options as written, trimmed, no quotes or
    commas), or None."""
    t = fold_term(raw).strip(" ./-_")
    low = t.lower()
    if len(t) < MIN_TERM_CHARS or len(t) > MAX_TERM_CHARS:
        return None
    if len(t.split()) > MAX_TERM_WORDS or not _ALLOWED.fullmatch(low):
        return None
    if low in STOP or t.isdigit() or all(w in STOP for w in low.split()):
        return None
    return t


def pattern_terms(pattern: str) -> list[str]:
    """The literal runs of a grep pattern, alternation split: ``deploy|roll.*back`` ->
    ``deploy``, ``roll``, ``back``; ``"exit code"`` -> ``exit code``."""
    out: list[str] = []
    for alt in re.split(r"\\?\|", pattern):
        alt = _REGEX_ESCAPES.sub(" ", alt)
        for run in _META.split(alt):
            t = clean_term(run)
            if t and t not in out:
                out.append(t)
    return out


def glob_terms(glob: str) -> list[str]:
    """``*deploy*.md`` -> ``deploy``."""
    base = glob.rsplit("/", 1)[-1]
    for suf in NOTE_SUFFIXES:
        if base.lower().endswith(suf):
            base = base[: -len(suf)]
    return [t for t in (clean_term(r) for r in re.split(r"[*?\[\]{}]+", base)) if t]


def file_stem(path: str) -> str:
    base = path.rstrip("/").rsplit("/", 1)[-1]
    for suf in NOTE_SUFFIXES:
        if base.lower().endswith(suf):
            return base[: -len(suf)]
    return base


def store_relative(path: str, roots: dict[str, str]) -> tuple[str, str] | None:
    """``(domain, path relative to its root)`` for an absolute path inside a store."""
    if not path:
        return None
    p = os.path.normpath(os.path.expanduser(path))
    if not os.path.isabs(p):
        return None
    for domain, root in roots.items():
        if p.startswith(root + os.sep):
            return domain, p[len(root) + 1 :].replace(os.sep, "/")
    return None


class Hunt:
    """What one lookup was after: ``terms`` (match-term candidates) and ``files`` (the note
    files it named: ``domain:path`` when the path could be placed in a store, else the stem)."""

    __slots__ = ("terms", "files", "tool")

    def __init__(self, tool: str = ""):
        self.terms: list[str] = []
        self.files: list[str] = []
        self.tool = tool

    def add_terms(self, terms) -> None:
        for t in terms:
            if t and t not in self.terms:
                self.terms.append(t)

    def add_file(self, path: str, roots: dict[str, str]) -> None:
        if not path or path.startswith("-"):
            return
        norm = os.path.normpath(os.path.expanduser(path))
        if norm in roots.values() or norm in (".", "..", "/", "~"):
            return  # the store itself (or the current folder): names nothing in particular
        placed = store_relative(path, roots)
        stem = file_stem(path)
        if placed is not None and placed[1].lower().endswith(NOTE_SUFFIXES):
            self.files.append(f"{placed[0]}:{placed[1]}")
        elif stem and not path.lower().endswith(NOTE_SUFFIXES):
            # a folder or another file: its last name says what was hunted, it is no note
            self.add_terms([clean_term(stem.replace("_", " ").replace("-", " ")) or clean_term(stem)])
            return
        if stem:
            self.files.append(stem.lower())
            self.add_terms([clean_term(stem) or clean_term(stem.replace("-", " ").replace("_", " "))])


def command_hunt(command: str, roots: dict[str, str]) -> Hunt:
    """The terms and files a shell command hunted for (only its lookup commands count)."""
    h = Hunt("Bash")
    for words in command_words(command):
        i = 0
        while i < len(words) and (("=" in words[i] and not words[i].startswith("-")) or words[i] in _WRAPPERS):
            i += 1
        if i >= len(words):
            continue
        cmd = os.path.basename(words[i])
        args = words[i + 1 :]
        if cmd == "git" and args[:1] == ["grep"]:
            cmd, args = "git-grep", args[1:]
        if cmd not in LOOKUP_COMMANDS:
            continue
        if cmd in GREP_LIKE:
            pattern, positional, j = None, [], 0
            while j < len(args):
                a = args[j]
                if a in ("-e", "--regexp") and j + 1 < len(args):
                    pattern = args[j + 1] if pattern is None else pattern
                    h.add_terms(pattern_terms(args[j + 1]))
                    j += 2
                    continue
                if a in _VALUE_OPTS:
                    j += 2
                    continue
                if a.startswith("-") and a != "-":
                    j += 1
                    continue
                positional.append(a)
                j += 1
            if pattern is None and positional:
                h.add_terms(pattern_terms(positional[0]))
                positional = positional[1:]
            for p in positional:
                h.add_file(p, roots)
        elif cmd in FIND_LIKE:
            j = 0
            positional = []
            while j < len(args):
                a = args[j]
                if a in _FIND_NAME_OPTS and j + 1 < len(args):
                    h.add_terms(glob_terms(args[j + 1]))
                    j += 2
                    continue
                if a.startswith("-"):
                    j += 1
                    continue
                positional.append(a)
                j += 1
            if cmd in ("fd", "fdfind", "locate") and positional:
                h.add_terms(pattern_terms(positional[0]) if cmd != "locate" else glob_terms(positional[0]))
        elif cmd in READ_LIKE:
            for a in args:
                if not a.startswith("-") and not a.lstrip("+-").isdigit():
                    h.add_file(a, roots)
        # awk and sed take programs, not patterns a person would bind a note to
    return h


def tool_hunt(tool: str, tool_input: dict, roots: dict[str, str]) -> Hunt:
    """Read/Grep/Glob: the file read, the pattern grepped, the glob."""
    h = Hunt(tool)
    if not isinstance(tool_input, dict):
        return h
    if tool in ("Bash", "shell", "exec_command", "local_shell"):
        cmd = tool_input.get("command") or ""
        if isinstance(cmd, list):
            cmd = " ".join(str(c) for c in cmd)
        return command_hunt(str(cmd), roots)
    if tool == "Read":
        h.add_file(str(tool_input.get("file_path") or ""), roots)
    elif tool == "Grep":
        h.add_terms(pattern_terms(str(tool_input.get("pattern") or "")))
        glob = tool_input.get("glob")
        if glob:
            h.add_terms(glob_terms(str(glob)))
    elif tool == "Glob":
        h.add_terms(glob_terms(str(tool_input.get("pattern") or "")))
    return h


def detail_of(raw: str) -> dict:
    if not raw:
        return {}
    try:
        d = json.loads(raw)
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def event_hunt(detail: dict, roots: dict[str, str]) -> Hunt:
    """A blocked or marked lookup row's hunt, from its ``detail``: ``command`` (a shell
    command), ``input`` (the tool input), or ``file_path`` / ``pattern`` / ``path``.
    A row carrying only ``{"tool", "what"}`` (no command) yields no terms."""
    tool = str(detail.get("tool") or "")
    if isinstance(detail.get("input"), dict):
        return tool_hunt(tool or "Bash", detail["input"], roots)
    if detail.get("command"):
        return command_hunt(str(detail["command"]), roots)
    flat = {k: detail[k] for k in ("file_path", "pattern", "path", "glob") if detail.get(k)}
    if flat:
        return tool_hunt(tool or ("Read" if "file_path" in flat else "Grep"), flat, roots)
    return Hunt(tool)


def query_words(query: str) -> list[str]:
    """Single words of a search query worth binding to: ``how do I deploy to staging`` ->
    ``deploy``, ``staging``."""
    out: list[str] = []
    for w in _WORD.findall(query.lower()):
        t = clean_term(w)
        if t and " " not in t and t not in out:
            out.append(t)
    return out


def slug(terms: list[str], limit: int = 48) -> str:
    s = "-".join(re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-") for t in terms if t)
    s = re.sub(r"-+", "-", s).strip("-")[:limit].strip("-")
    return s or "lookup"
