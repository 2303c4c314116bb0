"""The rules a team already keeps, read in each tool's own format (standard library only).

A team's repository often holds memory written for other tools: Cursor rules
(``.cursor/rules/*.mdc``), ``CLAUDE.md`` (Claude Code's project memory, also
``.claude/CLAUDE.md``), ``AGENTS.md`` and Claude skills (``.claude/skills/<name>/SKILL.md``).
geode reads them where they are and never writes them; ``geode.delivery.team_sync`` turns what
this module reads into the derived notes of a domain of their own.

Each format as its tool documents it:

- **Cursor rule**: a ``---`` header read line by line, not as YAML (``description:``,
  ``globs:``, ``alwaysApply:``). ``globs`` is a comma-separated list of gitignore-style
  patterns, written without quotes or brackets (quoted, Cursor keeps the quotes and the rule
  never attaches). ``alwaysApply: true`` is always in context; otherwise globs attach it to
  matching files; a description alone lets the agent ask for it; none of them: only a manual
  ``@rule`` mention brings it in.
- **CLAUDE.md / AGENTS.md**: plain markdown; each ATX heading opens a section. CLAUDE.md
  imports other files with ``@path`` (relative, absolute or ``~/``), never inside a code span
  or a fenced block.
- **SKILL.md**: YAML frontmatter with ``name`` and ``description`` (what Claude reads to decide
  to use the skill), then the instructions.

Why not ``re``, ``fnmatch`` or ``header_format``: the hook imports this module and may load only
the lean standard library (tests/test_hook_imports.py). Differential tests hold the readers to
markdown-it (headings), PyYAML (SKILL.md frontmatter), ``header_format.cursor_fields`` (the
Cursor header) and pathspec's gitwildmatch (globs).
"""

from __future__ import annotations

import os

from geode.kernel.frontmatter import FrontmatterError, parse_frontmatter

TYPE_CHECKING = False  # not ``typing``'s: the hook imports this module
if TYPE_CHECKING:
    from collections.abc import Iterator

#: the kinds of file read, by the tool that reads them
CURSOR_RULE = "cursor-rule"
CLAUDE_MD = "claude-md"
AGENTS_MD = "agents-md"
SKILL = "skill"

#: how a Cursor rule is brought into the agent's context (Cursor's four modes)
ALWAYS = "always"
GLOBS = "auto-attached"
REQUESTED = "agent-requested"
MANUAL = "manual"

#: the memory files at a repository's root, in the order Claude Code and the agents read them
ROOT_FILES = (("CLAUDE.md", CLAUDE_MD), (".claude/CLAUDE.md", CLAUDE_MD), ("AGENTS.md", AGENTS_MD))
RULES_DIR = ".cursor/rules"
SKILLS_DIR = ".claude/skills"

#: the first words of commands a section may name (in a fenced shell block or an inline code span)
COMMAND_WORDS = frozenset(
    "npm npx yarn pnpm bun node deno make cmake cargo go pytest python python3 pip uv poetry tox nox ruff "
    "mypy black git docker kubectl helm terraform gradle ./gradlew mvn dotnet bundle rake rails mix "
    "composer php swift xcodebuild flutter dart just task bazel".split()
)
_SHELL_LANGS = ("", "sh", "bash", "shell", "console", "zsh", "terminal")


class Section:
    """One unit geode reads from a team file: a rule, a section, a skill.

    ``kind``: for a Cursor rule its mode (``ALWAYS``, ``GLOBS``, ``REQUESTED``, ``MANUAL``),
    ``section`` for a CLAUDE.md / AGENTS.md section, ``skill`` for a skill."""

    __slots__ = ("source", "source_kind", "line", "kind", "title", "body", "globs", "description", "commands", "slug")

    def __init__(
        self,
        source: str,
        source_kind: str,
        line: int,
        kind: str,
        title: str,
        body: str,
        slug: str,
        globs: tuple[str, ...] = (),
        description: str = "",
        commands: tuple[str, ...] = (),
    ) -> None:
        self.source, self.source_kind, self.line, self.kind = source, source_kind, line, kind
        self.title, self.body, self.slug = title, body, slug
        self.globs, self.description, self.commands = globs, description, commands

    def __repr__(self) -> str:
        return f"Section({self.source!r}:{self.line}, {self.kind!r}, {self.title!r})"


class Trouble:
    """Why a team rule can never apply, or cannot be read: ``(path, line, code, message)``."""

    __slots__ = ("path", "line", "code", "message")

    def __init__(self, path: str, line: int, code: str, message: str) -> None:
        self.path, self.line, self.code, self.message = path, line, code, message

    def __repr__(self) -> str:
        return f"Trouble({self.path!r}, {self.line}, {self.code!r})"


# -- where nothing is written ------------------------------------------------------------------
def write_refusal(settings, domain: str) -> str | None:
    """Why nothing may be written into ``domain``, or None when it is an ordinary domain.

    A team-rules domain's notes are derived into ``GEODE_HOME/team/<name>`` from the rules in a
    repository (``geode.delivery.team_sync``): the next sync rewrites a derived note from its
    source and a rebuild starts the folder again from nothing, so a note written or approved
    there would be lost without a word. Every surface that writes (the MCP ``write_note``, the
    queue's apply, so the page and ``geode proposals approve``) refuses with this message."""
    repo = (getattr(settings, "team_rules", None) or {}).get(domain)
    if repo is None:
        return None
    others = [d for d in getattr(settings, "domains", {}) if d not in settings.team_rules]
    where = f"write to another domain ({', '.join(others)})" if others else "configure a domain of your own"
    return (
        f"domain {domain!r} is a team-rules domain ([team_rules] in geode.toml): its notes are derived "
        f"from the rules in {repo} and rewritten from them by the next sync, so a note written there "
        f"would be lost; change the rule in the repository, or {where}"
    )


# -- which files -------------------------------------------------------------------------------
def walk(root: str, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, os.DirEntry]]:
    """``(relative POSIX path, entry)`` of everything below ``root`` that is not a folder,
    entries of a folder by name, the folder's own files before the folders below it; a
    symlinked folder is never entered, a folder named in ``skip`` never read, an unreadable one
    passed over. The one walk of a team's repository: ``discover`` keeps the Cursor rules of
    ``.cursor/rules`` (a dot folder the store walk, ``geode.kernel.store``, would skip), and
    ``repo_files`` every path lint matches a glob against."""
    stack = [""]
    while stack:
        sub = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, sub) if sub else root), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            rel = f"{sub}/{e.name}" if sub else e.name
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                yield rel, e
            elif e.name not in skip:
                stack.append(rel)


def discover(repo: str) -> list[tuple[str, str]]:
    """``(relative path, kind)`` of every team file under ``repo``, in a stable order: the root
    memory files, ``.cursor/rules/**/*.mdc``, ``.claude/skills/*/SKILL.md``. Nothing else of the
    repository is looked at (a repository's other markdown is not the team's memory)."""
    out: list[tuple[str, str]] = []
    for rel, kind in ROOT_FILES:
        if os.path.isfile(os.path.join(repo, rel)):
            out.append((rel, kind))
    for rel, entry in walk(os.path.join(repo, RULES_DIR)):
        try:
            if rel.endswith(".mdc") and entry.is_file(follow_symlinks=False):
                out.append((f"{RULES_DIR}/{rel}", CURSOR_RULE))
        except OSError:
            continue
    try:
        skills = sorted(os.scandir(os.path.join(repo, SKILLS_DIR)), key=lambda e: e.name)
    except OSError:
        skills = []
    for e in skills:
        if e.is_dir(follow_symlinks=False) and os.path.isfile(os.path.join(e.path, "SKILL.md")):
            out.append((f"{SKILLS_DIR}/{e.name}/SKILL.md", SKILL))
    return out


# -- Cursor rules ----------------------------------------------------------------------------
def mdc_header(text: str) -> tuple[dict[str, str], dict[str, int], int] | None:
    """The ``---`` header of a Cursor rule as Cursor reads it: ``key: raw value`` per line
    (quotes kept), with each key's line and the number of lines the header spans; None when
    the file has no closed header. The reading of ``header_format.cursor_fields``, without ``re``."""
    body = text[1:] if text.startswith("\ufeff") else text
    lines = body.split("\n")
    if not lines or lines[0].rstrip("\r").rstrip() != "---":
        return None
    for end in range(1, len(lines)):
        if lines[end].rstrip("\r").rstrip() == "---":
            break
    else:
        return None
    data: dict[str, str] = {}
    where: dict[str, int] = {}
    for i in range(1, end):
        key, sep, value = lines[i].rstrip("\r").partition(":")
        if not sep or not key.strip() or key != key.lstrip():
            continue
        data[key.strip()] = value.strip()
        where[key.strip()] = i + 1
    return data, where, end + 1


def split_globs(value: str) -> tuple[str, ...]:
    """Cursor's ``globs:``: comma-separated patterns (a YAML-style ``[a, b]`` list is read too,
    as Cursor accepts it); empty pieces dropped, quotes kept (Cursor keeps them)."""
    v = value.strip()
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
        parts = [p.strip().strip("\"'") for p in v.split(",")]
    else:
        parts = [p.strip() for p in _split_outside_braces(v)]
    return tuple(p for p in parts if p)


def _split_outside_braces(value: str) -> list[str]:
    """Split at commas that are not inside ``{a,b}`` (a brace list is one pattern)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in value:
        if ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        if ch == "," and not depth:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def read_cursor_rule(rel: str, text: str) -> tuple[list[Section], list[Trouble]]:
    """One rule file: one ``Section`` in the rule's mode, and what keeps it from applying."""
    header = mdc_header(text)
    stem = rel.rsplit("/", 1)[-1][: -len(".mdc")]
    troubles: list[Trouble] = []
    data: dict[str, str] = {}
    where: dict[str, int] = {}
    spans = 0
    if header is not None:
        data, where, spans = header
    body_lines = text.split("\n")[spans:]
    body = "\n".join(body_lines).strip()
    always_raw = data.get("alwaysApply", "").strip()
    always = always_raw.lower() == "true"
    if always_raw and always_raw.lower() not in ("true", "false"):
        troubles.append(
            Trouble(
                rel,
                where.get("alwaysApply", 1),
                "team-rule-bad-always",
                f"alwaysApply: {always_raw} is not true or false: Cursor does not always apply the rule",
            )
        )
    globs = split_globs(data.get("globs", ""))
    description = data.get("description", "").strip()
    for g in globs:
        if g[:1] in "\"'" or g[-1:] in "\"'":
            troubles.append(
                Trouble(
                    rel,
                    where.get("globs", 1),
                    "team-glob-quoted",
                    f"glob {g} is quoted: Cursor keeps the quotes, so it matches no file (write globs unquoted)",
                )
            )
    if always:
        kind = ALWAYS
    elif globs:
        kind = GLOBS
    elif description:
        kind = REQUESTED
    else:
        kind = MANUAL
        troubles.append(
            Trouble(
                rel,
                where.get("alwaysApply", 1),
                "team-rule-never-applies",
                "the rule is not alwaysApply and has neither globs nor a description: "
                "only a manual @-mention in Cursor brings it in, and geode can never deliver it",
            )
        )
    if not body:
        troubles.append(Trouble(rel, spans or 1, "team-rule-empty", "the rule has no text to deliver"))
    title = description or stem
    section = Section(rel, CURSOR_RULE, spans + 1 if spans else 1, kind, title, body, stem, globs, description)
    return [section], troubles


# -- markdown sections -------------------------------------------------------------------------
def _fence(line: str) -> tuple[str, int, str] | None:
    """``(fence char, length, info)`` when ``line`` opens or closes a fenced code block."""
    s = line.lstrip(" ")
    if len(line) - len(s) > 3:
        return None
    for ch in "`~":
        if s.startswith(ch * 3):
            n = len(s) - len(s.lstrip(ch))
            info = s[n:].strip()
            if ch == "`" and "`" in info:
                return None
            return ch, n, info
    return None


def atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` of an ATX heading line (CommonMark: up to three spaces, 1-6 ``#``, then
    a space or the end; a closing run of ``#`` removed)."""
    s = line.rstrip("\r")
    stripped = s.lstrip(" ")
    if len(s) - len(stripped) > 3 or not stripped.startswith("#"):
        return None
    n = len(stripped) - len(stripped.lstrip("#"))
    if n > 6:
        return None
    rest = stripped[n:]
    if rest and rest[0] not in " \t":
        return None
    text = rest.strip(" \t")
    if text.endswith("#"):
        cut = text.rstrip("#")
        if not cut or cut[-1] in " \t":
            text = cut.rstrip(" \t")
    return n, text


def markdown_lines(text: str) -> list[tuple[int, str, bool]]:
    """Every line as ``(1-based number, text, inside a fenced block)``; fence lines count as inside."""
    out = []
    fence: tuple[str, int] | None = None
    for i, line in enumerate(text.split("\n"), start=1):
        f = _fence(line)
        if fence is None:
            if f is not None:
                fence = (f[0], f[1])
                out.append((i, line, True))
                continue
            out.append((i, line, False))
        else:
            out.append((i, line, True))
            if f is not None and f[0] == fence[0] and f[1] >= fence[1] and not f[2]:
                fence = None
    return out


def headings(text: str) -> list[tuple[int, int, str]]:
    """``(line, level, text)`` of every ATX heading outside fenced blocks."""
    out = []
    for i, line, fenced in markdown_lines(text):
        if not fenced:
            h = atx_heading(line)
            if h is not None:
                out.append((i, h[0], h[1]))
    return out


def slugify(text: str) -> str:
    """A file-name-safe slug of a heading (lower-case letters and digits joined by ``-``)."""
    out, dash = [], False
    for ch in text.lower():
        if ch.isalnum():
            out.append(ch)
            dash = False
        elif not dash and out:
            out.append("-")
            dash = True
    return "".join(out).strip("-")[:60] or "section"


def read_sections(rel: str, kind: str, text: str) -> list[Section]:
    """Each ATX heading of a CLAUDE.md or AGENTS.md opens a section that runs to the next heading;
    text before the first heading is a section titled by the file. Sections with no text of
    their own (a title right before its first subheading) are left out."""
    lines = text.split("\n")
    marks = headings(text)
    spans: list[tuple[int, int, str, int]] = []  # (start line, end line exclusive, title, level)
    first = marks[0][0] if marks else len(lines) + 1
    if first > 1:
        spans.append((1, first, rel, 0))
    for n, (line, level, title) in enumerate(marks):
        end = marks[n + 1][0] if n + 1 < len(marks) else len(lines) + 1
        spans.append((line, end, title, level))
    out: list[Section] = []
    seen: dict[str, int] = {}
    parents: list[tuple[int, str]] = []
    for start, end, title, level in spans:
        if level:
            while parents and parents[-1][0] >= level:
                parents.pop()
            trail = [t for _l, t in parents] + [title]
            parents.append((level, title))
        else:
            trail = [title]
        body_from = start if not level else start  # the heading stays part of the section
        body = "\n".join(lines[body_from - 1 : end - 1]).strip()
        own = "\n".join(lines[start : end - 1]).strip() if level else body
        if not own:
            continue
        slug = slugify(title) if level else "preamble"
        seen[slug] = seen.get(slug, 0) + 1
        if seen[slug] > 1:
            slug = f"{slug}-{seen[slug]}"
        full_title = f"{rel} § {' › '.join(trail)}" if level else rel
        out.append(
            Section(rel, kind, start, "section", full_title, body, slug, commands=tuple(commands_in(body, start)))
        )
    return out


def _code_spans(line: str) -> list[str]:
    """The inline code spans of one line (single-backtick runs matched by length)."""
    out, i = [], 0
    while i < len(line):
        if line[i] != "`":
            i += 1
            continue
        n = 1
        while i + n < len(line) and line[i + n] == "`":
            n += 1
        close = line.find("`" * n, i + n)
        while close >= 0 and close + n < len(line) and line[close + n] == "`":
            close = line.find("`" * n, close + n + 1)
        if close < 0:
            break
        out.append(line[i + n : close].strip())
        i = close + n
    return out


def _looks_like_command(text: str) -> bool:
    words = text.split()
    return len(words) >= 2 and words[0] in COMMAND_WORDS


def commands_in(body: str, first_line: int = 1) -> list[str]:
    """The shell commands a section names: the lines of its fenced shell blocks (``$ `` prompts
    removed, comments skipped) and inline code spans that start with a known command word
    (``npm test``), in order, each once."""
    out: list[str] = []
    lang = ""
    for _i, line, fenced in markdown_lines(body):
        f = _fence(line)
        if fenced and f is not None:
            lang = f[2].split()[0].lower() if f[2] else ""
            continue
        if fenced:
            cmd = line.strip()
            if cmd.startswith("$ "):
                cmd = cmd[2:].strip()
            if lang in _SHELL_LANGS and cmd and not cmd.startswith("#") and _looks_like_command(cmd):
                out.append(cmd)
            continue
        for span in _code_spans(line):
            if _looks_like_command(span):
                out.append(span)
    return list(dict.fromkeys(out))


def claude_imports(text: str) -> list[tuple[int, str]]:
    """``(line, path)`` of every ``@path`` import of a CLAUDE.md: a word starting with ``@``
    outside fenced blocks and code spans, with a path after it (``@README``, ``@docs/a.md``,
    ``@~/.claude/x.md``). An e-mail address is not one (the ``@`` must start the word)."""
    out = []
    for i, line, fenced in markdown_lines(text):
        if fenced or "@" not in line:
            continue
        plain = line
        for span in _code_spans(line):
            plain = plain.replace(f"`{span}`", " ")
        for word in plain.split():
            if word.startswith("@") and len(word) > 1:
                path = word[1:].rstrip(".,;:)]}\"'")
                if path and (path[0].isalnum() or path[0] in "./~_"):
                    out.append((i, path))
    return out


def missing_imports(repo: str, rel: str, text: str) -> list[Trouble]:
    """The imports of a CLAUDE.md whose file does not exist (Claude Code then reads nothing)."""
    base = os.path.dirname(os.path.join(repo, rel))
    out = []
    for line, path in claude_imports(text):
        target = os.path.expanduser(path) if path.startswith("~") else os.path.join(base, path)
        if not os.path.exists(target):
            out.append(
                Trouble(
                    rel, line, "team-import-missing", f"@{path} imports a file that does not exist: nothing is read"
                )
            )
    return out


# -- skills ---------------------------------------------------------------------------------
def read_skill(rel: str, text: str) -> tuple[list[Section], list[Trouble]]:
    """A skill: its ``description`` (what Claude reads to pick it) and instructions, as recall."""
    name = rel.split("/")[-2]
    body = text[1:] if text.startswith("\ufeff") else text
    lines = body.split("\n")
    data: dict = {}
    spans = 0
    troubles: list[Trouble] = []
    if lines and lines[0].rstrip("\r").strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].rstrip("\r").strip() == "---":
                spans = end + 1
                try:
                    data = parse_frontmatter("\n".join(ln.rstrip("\r") for ln in lines[1:end]), 2).data
                except FrontmatterError as exc:
                    troubles.append(Trouble(rel, exc.line, "team-skill-bad-frontmatter", exc.message))
                break
    description = str(data.get("description") or "").strip()
    if not description:
        troubles.append(
            Trouble(
                rel,
                1,
                "team-skill-no-description",
                "the skill has no description: Claude never picks it, and recall has nothing to find it by",
            )
        )
    text_body = "\n".join(lines[spans:]).strip()
    title = f"skill {data.get('name') or name}"
    body_all = (description + "\n\n" + text_body).strip()
    return [Section(rel, SKILL, 1, "skill", title, body_all, slugify(name), description=description)], troubles


def read_file(repo: str, rel: str, kind: str, text: str) -> tuple[list[Section], list[Trouble]]:
    """What one team file holds, and its troubles (imports of CLAUDE.md checked against ``repo``)."""
    if kind == CURSOR_RULE:
        return read_cursor_rule(rel, text)
    if kind == SKILL:
        return read_skill(rel, text)
    troubles = missing_imports(repo, rel, text) if kind == CLAUDE_MD else []
    return read_sections(rel, kind, text), troubles


# -- globs ----------------------------------------------------------------------------------
def _expand_braces(pattern: str) -> list[str]:
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth = 0
    for j in range(start, len(pattern)):
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                inner = pattern[start + 1 : j]
                if "," not in inner:
                    return [pattern]
                out = []
                for alt in _split_outside_braces(inner):
                    out.extend(_expand_braces(pattern[:start] + alt + pattern[j + 1 :]))
                return out
    return [pattern]


def _seg_match(pat: str, name: str) -> bool:
    """One path segment against one pattern segment: ``*``, ``?``, ``[...]`` (``!``/``^`` negates)."""
    p = n = 0
    star_p, star_n = -1, 0
    while n < len(name):
        if p < len(pat):
            c = pat[p]
            if c == "*":
                star_p, star_n = p, n
                p += 1
                continue
            if c == "[":
                close = pat.find("]", p + 2)
                if close > 0:
                    cls = pat[p + 1 : close]
                    neg = cls[:1] in ("!", "^")
                    if neg:
                        cls = cls[1:]
                    hit, k = False, 0
                    while k < len(cls):
                        if k + 2 < len(cls) and cls[k + 1] == "-":
                            hit = hit or cls[k] <= name[n] <= cls[k + 2]
                            k += 3
                        else:
                            hit = hit or cls[k] == name[n]
                            k += 1
                    if hit != neg:
                        p, n = close + 1, n + 1
                        continue
                elif name[n] == "[":
                    p, n = p + 1, n + 1
                    continue
            elif c == "?" or c == name[n]:
                p, n = p + 1, n + 1
                continue
        if star_p >= 0:
            p, n = star_p + 1, star_n + 1
            star_n += 1
            continue
        return False
    while p < len(pat) and pat[p] == "*":
        p += 1
    return p == len(pat)


def _parts_match(pats: list[str], parts: list[str]) -> bool:
    if not pats:
        return not parts
    if pats[0] == "**":
        rest = pats[1:]
        return any(_parts_match(rest, parts[i:]) for i in range(len(parts) + 1))
    if not parts:
        return False
    return _seg_match(pats[0], parts[0]) and _parts_match(pats[1:], parts[1:])


def glob_match(pattern: str, path: str) -> bool:
    """Whether the repository-relative POSIX ``path`` matches a Cursor glob (gitignore style):
    ``*`` and ``?`` within one segment, ``**`` any number of segments, ``{a,b}`` alternatives,
    ``[...]`` classes; a pattern without ``/`` matches the name at any depth, one with a ``/``
    is anchored at the repository root; a trailing ``/`` or ``/**`` matches everything below."""
    for pat in _expand_braces(pattern.strip()):
        if not pat:
            continue
        anchored = "/" in pat.rstrip("/")
        pat = pat.lstrip("/")
        if pat.endswith("/"):
            pat += "**"
        pats = [s for s in pat.split("/") if s]
        if pats and pats[-1] == "**":
            pats.append("*")
        if not anchored:
            pats = ["**"] + pats
        if _parts_match(pats, [s for s in path.split("/") if s]):
            return True
    return False


def repo_files(repo: str, limit: int = 200_000) -> list[str]:
    """The repository's file paths (relative, POSIX), tool state (``.git``, ``node_modules``)
    left out: what lint matches each glob against. At most ``limit`` paths."""
    from geode.kernel.crystal import SKIP_DIRS

    out: list[str] = []
    for rel, _entry in walk(repo, SKIP_DIRS):
        if len(out) >= limit:
            break
        out.append(rel)
    return out


def unmatched_globs(repo: str, sections: list[Section], files: list[str] | None = None) -> list[Trouble]:
    """Globs of auto-attached rules that match no file in the repository (the rule never attaches)."""
    files = repo_files(repo) if files is None else files
    out = []
    for s in sections:
        if s.kind != GLOBS:
            continue
        for g in s.globs:
            if not any(glob_match(g, f) for f in files):
                out.append(
                    Trouble(s.source, 1, "team-glob-matches-nothing", f"glob {g} matches no file in the repository")
                )
    return out
