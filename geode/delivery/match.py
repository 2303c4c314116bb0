"""When a match term fires on an action: shell tokens for commands, word boundaries for text.

Why not a substring (what geode did before): a term that is a plain substring fires where it
should not. ``.env`` is inside ``os.environ``, ``git add .`` is a prefix of
``git add ./app/settings.py`` (exactly what the "stage by path" advice says to run), and ``ls``
is inside ``false``, ``else`` and ``tools``. A note that arrives on the wrong action teaches the
agent to skip notes. The rules, in short (README, "Matching", has the full list):

- **Bash actions** (``bash``, ``commit``) are split the way a shell splits them: quotes
  removed, ``|``, ``||``, ``&&``, ``;``, ``&``, redirections, ``$(``, backticks, subshells and
  newlines are operators, here-documents are data. A term is split the same way and matches a
  run of the command's tokens: ``| tail`` matches ``npm test |tail -5`` and
  ``npm test 2>&1 | tail``; ``git add .`` matches ``git add . && git commit`` and not
  ``git add ./app/settings.py``. Inside a run the first word may end a longer word
  (``/usr/bin/npm run build``) and the last may begin one (``npm run build:prod``), at a word
  boundary; a hyphen joins words (``--force`` is not ``--force-with-lease``, ``ls`` is not in
  ``ls-files``). A one-word term that is a name (``ssh``, ``ls``, ``deploy``) matches a whole
  word, or a component of a path or assignment with or without its extension (``/bin/ls``,
  ``./deploy.sh``, ``C:\\tools\\x``, ``--opt=NAME``), never part of one (``~/.ssh/config``,
  ``ssh://host``, ``tools``). A term word made only
  of punctuation (``.``, ``/``, ``--``) matches only punctuation (``.`` matches ``./`` and
  ``..``, not ``./app``); one that starts with ``$`` (``rm -rf $``, ``rm -rf ${``) and a term
  that ends inside quotes (``rm -rf "$``) may begin a longer word; a single-dash option
  (``-a``, ``-n``) may begin a cluster (``-am``, ``-n5``); an option never matches inside
  another word (``-delete`` is not in ``--delete``). Quoted text with spaces is matched as a
  command of its own (``ssh host 'journalctl | grep -v x'``, ``sh -c "npm test | tail"``),
  except the arguments of ``echo``/``printf`` and the message of ``git commit -m`` and the like,
  which are prose; echo output redirected into a file and here-document bodies are data, matched
  by the word rule below. A command that cannot be split (an unclosed quote) falls back to the
  word rule.
- **Paths and file content** (``write``, ``edit``, ``read``, and prompts): a term whose first or
  last character is a letter or digit must not continue into a letter or digit of the text
  (``.env`` matches ``.env``, ``app/.env.local``, ``load_dotenv(".env")``, not ``os.environ``).
  A term that starts with ``.`` after a name reads as a file extension (``prod.env``) and so
  must not go on into ``.`` + a name: ``process.env.API_URL`` is a member access (in commands
  too). A term that ends in ``.`` or ``/`` does not go on into a path through more dots or
  slashes (``git add .`` is not in ``git add ./docs`` or ``../x``), as a command's
  punctuation word does not.
  An underscore before the term is a boundary only in SCREAMING_SNAKE context (neither the
  matched text nor the name it sits in has a lowercase letter): ``password=`` matches
  ``DB_PASSWORD=`` and ``api_key`` matches ``OPENAI_API_KEY`` (environment variables split on
  ``_``), while ``settings.py`` does not match ``test_settings.py`` (a lowercase name goes on
  through ``_``). An underscore after the term always ends it: a name may begin with the term
  (``id_rsa`` matches ``id_rsa_work``). In that context a term that is a name and ``=``
  (``password=``) also matches the tail of an upper-case name that ends at its ``=``
  (``PGPASSWORD=``): prefixes like ``PG`` and ``MYSQL_`` say whose secret it is. The same holds
  for a command's words, read as written. Backslashes in a path are read as slashes (``secrets/`` matches
  ``C:\\repo\\secrets\\x.json``).
- **``substring:``** in front of a term (``substring:rm -rf $``) asks for the old rule: the term
  occurs anywhere in the action's text, case-insensitively.
- **The term grammar** (``gram_match``, on top of the runs above, which still fire): a term of
  words (and ``|``) matches the words of one simple command in order. Its first word is a command,
  also after assignments and wrappers (``sudo``, ``env X=1``, ``nice``, ``xargs``, ``python -m``,
  ``npx``, ``time``, ``nohup``, ``timeout``, ``uv run``: ``_WRAPPERS``); its words up to its first
  option are subcommands with only options and their values between (``git -C dir reset``); the
  rest follow anywhere later (``git push origin main --force``). A ``|`` term matches a pipeline's
  stages in order (``curl | sh`` on ``curl -fsSL URL | sudo sh``). A short option (``-D``) matches
  only as written, everywhere; a long one folds. ``exact:`` keeps the adjacent runs alone, with
  options folded (the rule before the grammar). Terms stay as written (``Term.orig``).

A term never fires on a command that does not contain each of its words, in order
(tests/test_match.py proves it with generated commands); an ``exact:`` term only narrows the
substring rule. This module is on the
hook's path: standard library only, no ``re`` (``shlex`` imports it), so the tokenizer is
hand-written and proven against ``shlex`` by a differential test.
"""

from __future__ import annotations

from geode.kernel.errors import GeodeError

SUBSTRING_MARK = "substring:"
EXACT_MARK = "exact:"
#: ``npm test unless:--runInBand``: the term fires where its first part does and none of the parts
#: after `` unless:`` does (a draft from a failed-then-fixed pair fires on the failing form, never
#: on the fix: docs/CAPTURE.md)
UNLESS_MARK = " unless:"
BASH_KINDS = ("bash", "commit")

_OP_START = "|&;<>()`\n"
_WS = " \t\r"
#: separators of the components of a shell word (paths, assignments, lists, user@host)
_COMPONENT_SEPS = "/\\=,@"
#: in these commands' option values the text is prose about the change, never a command
_MESSAGE_TOOLS = frozenset({"git", "hg", "svn", "gh", "glab", "jj"})
_MESSAGE_OPTS = frozenset({"-m", "--message", "--body", "--title", "--notes", "-b", "-t", "--subject"})
_PROSE_COMMANDS = frozenset({"echo", "printf"})
#: these commands search for their quoted arguments, never run them: ``grep "DROP TABLE"`` is no
#: ``DROP TABLE`` (a quoted argument with spaces is otherwise read as a command of its own)
_PATTERN_COMMANDS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep"})
_MAX_DEPTH = 3


class ShellParseError(GeodeError, ValueError):
    """The command cannot be split the way a shell would (an unclosed quote)."""


class Tok:
    """One token: an operator, or a word (``spaced``: its quoted part held whitespace;
    ``prose``: an echo argument or a commit message, which single-word terms do not search)."""

    __slots__ = ("text", "op", "spaced", "prose", "raw", "cased")

    def __init__(self, text: str, op: bool = False, spaced: bool = False, raw: str = ""):
        self.text = text
        self.op = op
        self.spaced = spaced
        self.prose: bool | str = False  # True: prose; "data": echo text redirected into a file
        self.raw = raw  # the quoted part's content, for a nested command
        self.cased = text  # the text as written (``_segments``): for SCREAMING_SNAKE context

    def __repr__(self) -> str:
        return f"{'op' if self.op else 'w'}:{self.text!r}"


def _is_wc(ch: str) -> bool:
    return ch.isalnum()


def _aligned(text: str) -> str:
    """``text`` as written when its lower-cased form has the same length (so that a position
    in one is the same character in the other); else lower-cased, which reads as no capitals."""
    low = text.lower()
    return text if len(low) == len(text) else low


def _screaming(cased: str, k: int, i: int, j: int) -> bool:
    """SCREAMING_SNAKE context: neither the matched text ``cased[i:j]`` nor the name (letters,
    digits, underscores) through ``cased[k]`` holds a lowercase letter (``DB_PASSWORD``, not
    ``test_settings``)."""
    a = b = k
    while a > 0 and _is_name(cased[a - 1]):
        a -= 1
    while b < len(cased) and _is_name(cased[b]):
        b += 1
    return not any(c.islower() for c in cased[a:b]) and not any(c.islower() for c in cased[i:j])


def _read_op(s: str, i: int) -> str:
    """The operator starting at ``s[i]`` (longest match, as bash reads them)."""
    for op in (
        "&>>",
        "<<<",
        "<<-",
        ";;&",
        "||",
        "|&",
        "&&",
        "&>",
        ";;",
        ";&",
        "<<",
        "<>",
        "<&",
        "<(",
        ">>",
        ">&",
        ">|",
        ">(",
    ):
        if s.startswith(op, i):
            return op
    return s[i]


def split_shell(cmd: str, lenient: bool = False) -> tuple[list[Tok], list[str], bool]:
    """Split one command line: (tokens, here-document bodies, ended inside quotes).

    Raises ``ShellParseError`` on an unclosed quote unless ``lenient`` (used for terms, which
    may end inside quotes on purpose: ``rm -rf "$``)."""
    toks: list[Tok] = []
    data: list[str] = []
    n = len(cmd)
    i = 0
    cur: list[str] = []
    in_word = False
    spaced = False
    raw_parts: list[str] = []
    heredocs: list[tuple[str, bool]] = []
    expect_delim = 0  # 1: the next word is a here-document delimiter; 2: with <<- (tabs stripped)
    open_end = False

    def end_word() -> None:
        nonlocal cur, in_word, spaced, raw_parts, expect_delim
        if in_word:
            word = "".join(cur)
            if expect_delim:
                heredocs.append((word, expect_delim == 2))
                expect_delim = 0
            toks.append(Tok(word, False, spaced, " ".join(raw_parts)))
        cur = []
        in_word = False
        spaced = False
        raw_parts = []

    while i < n:
        ch = cmd[i]
        if ch in _WS:
            end_word()
            i += 1
            continue
        if ch == "'" or ch == '"':
            j = i + 1
            part: list[str] = []
            if ch == "'":
                k = cmd.find("'", j)
                if k < 0:
                    if not lenient:
                        raise ShellParseError(f"unclosed ' at {i}")
                    k = n
                    open_end = True
                part.append(cmd[j:k])
                i = k + 1
            else:
                while j < n and cmd[j] != '"':
                    c = cmd[j]
                    if c == "\\" and j + 1 < n and cmd[j + 1] in '$`"\\\n':
                        if cmd[j + 1] != "\n":
                            part.append(cmd[j + 1])
                        j += 2
                        continue
                    part.append(c)
                    j += 1
                if j >= n:
                    if not lenient:
                        raise ShellParseError(f'unclosed " at {i}')
                    open_end = True
                i = j + 1
            text = "".join(part)
            cur.append(text)
            raw_parts.append(text)
            in_word = True
            if any(c in text for c in " \t\n"):
                spaced = True
            continue
        if ch == "\\":
            if i + 1 >= n:
                cur.append("\\")
                in_word = True
                i += 1
                continue
            nxt = cmd[i + 1]
            if nxt == "\n":  # a line continuation
                i += 2
                continue
            if nxt.isalnum() or nxt == ".":  # kept: an unquoted Windows path (C:\Users\me\.env)
                cur.append("\\")
                cur.append(nxt)
            else:
                cur.append(nxt)
            in_word = True
            i += 2
            continue
        if ch == "#" and not in_word:
            k = cmd.find("\n", i)
            i = n if k < 0 else k
            continue
        if ch == "$" and i + 1 < n and cmd[i + 1] == "(":
            end_word()
            toks.append(Tok("$(", True))
            i += 2
            continue
        if ch in _OP_START:
            # digits right before < or > stay a word of their own: `2>&1` is 2, >&, 1, as shlex
            # splits it (so `> /dev/null` matches `2>/dev/null` too)
            end_word()
            op = _read_op(cmd, i)
            i += len(op)
            if op == "\n":
                if toks and (toks[-1].op and toks[-1].text in ("|", "||", "&&", "|&", "(", "\n", "$(", "`")):
                    pass  # a newline after these continues the command
                elif toks:
                    toks.append(Tok("\n", True))
                if heredocs:
                    i = _read_heredocs(cmd, i, heredocs, data)
                    heredocs = []
                continue
            toks.append(Tok(op, True))
            if op in ("<<", "<<-"):
                expect_delim = 2 if op == "<<-" else 1
            continue
        cur.append(ch)
        in_word = True
        i += 1
    end_word()  # (a here-document opened on the last line has no body: nothing follows it)
    while toks and toks[-1].op and toks[-1].text == "\n":
        toks.pop()
    return toks, data, open_end


#: operators that end a simple command (what the guard and the hook's command counts split on);
#: the rest (``>``, ``<``, ``2>&1``, ``<<``, ...) are redirections inside one
_CONTROL_OPS = frozenset({"|", "||", "&&", ";", "&", "|&", ";;", ";&", ";;&", "(", ")", "\n", "$(", "`", "<(", ">("})
_DUP_OPS = frozenset({">&", "<&"})
_HERE_OPS = frozenset({"<<", "<<-", "<<<"})


def command_words(command: str) -> list[list[str]]:
    """The simple commands of ``command`` as lists of words (quotes removed, case kept).

    The one shell reading of geode: the lookup guard, the hook's ``git commit`` and command
    counts, and the Gardener (which must read a blocked command the way the hook read it) all
    take their words from ``split_shell``, the tokenizer the match terms use. It is lenient (an
    unclosed quote still yields words: a guard must not be passed by a stray quote). Control
    operators (pipes, lists, subshells, ``$(``, backticks) end a command; a redirection's operator
    is dropped and its target stays a word of the command (``cat < /store/x`` reads the store); a
    file-descriptor number (``2>``, ``>&1``), a here-document's delimiter and a here-string are
    no words; here-document bodies are data, not
    commands."""
    toks, _data, _open = split_shell(command, lenient=True)
    segs: list[list[str]] = []
    words: list[str] = []
    n = len(toks)
    for k, t in enumerate(toks):
        if t.op:
            if t.text in _CONTROL_OPS and words:
                segs.append(words)
                words = []
            continue
        nxt = toks[k + 1] if k + 1 < n else None
        if t.text.isdigit() and nxt is not None and nxt.op and nxt.text not in _CONTROL_OPS:
            continue  # 2>/dev/null: the 2 names a descriptor
        prev = toks[k - 1] if k else None
        if prev is not None and prev.op and prev.text in _DUP_OPS and (t.text.isdigit() or t.text == "-"):
            continue  # 2>&1, <&-: a descriptor, not a file
        if prev is not None and prev.op and prev.text in _HERE_OPS:
            continue  # a here-document's delimiter or a here-string's text, not a file
        words.append(t.text)
    if words:
        segs.append(words)
    return segs


def _read_heredocs(cmd: str, i: int, heredocs: list[tuple[str, bool]], data: list[str]) -> int:
    """Consume the bodies of the pending here-documents from ``i``; returns where the
    command resumes. A body without its delimiter runs to the end."""
    n = len(cmd)
    for delim, strip_tabs in heredocs:
        body: list[str] = []
        while i < n:
            k = cmd.find("\n", i)
            line = cmd[i:] if k < 0 else cmd[i:k]
            i = n if k < 0 else k + 1
            if (line.lstrip("\t") if strip_tabs else line) == delim:
                break
            body.append(line)
        data.append("\n".join(body))
    return i


class Prepared:
    """An action's text made ready for matching, once per call.

    ``kind``: ``bash`` or ``text``; ``raw``: the text lower-cased; ``norm``: what the index's
    substring prefilter compares term keys with (tokens joined by single spaces, one line per
    command segment, then the data; for text, the text with the path's backslashes turned
    into slashes); ``segments``: token lists (the command, then each nested quoted command);
    ``data``: here-document bodies and redirected echo text; ``failed``: the command could not
    be split (the word rule applies to ``raw``)."""

    __slots__ = ("kind", "raw", "norm", "cased", "segments", "data", "data_cased", "failed", "_cache")

    def __init__(self, kind: str, raw: str, cased: str = ""):
        self.kind = kind
        self.raw = raw
        self.norm = raw
        self.cased = cased or raw  # ``raw`` (or ``norm`` for text) as written, same positions
        self.segments: list[list[Tok]] = []
        self.data: list[str] = []
        self.data_cased: list[str] = []
        self.failed = False
        self._cache: dict = {}


def _mark_prose(toks: list[Tok]) -> None:
    """echo/printf arguments and commit messages are prose; echo text redirected into a file
    is data (returned through ``Tok.prose = 'data'``)."""
    start = 0
    n = len(toks)
    while start < n:
        end = start
        while end < n and not (toks[end].op and toks[end].text not in (">", ">>", "<", "&>", "&>>", ">|", ">&", "<&")):
            end += 1
        words = [t for t in toks[start:end] if not t.op]
        j = 0
        while j < len(words) and "=" in words[j].text and not words[j].text.startswith("-"):
            j += 1  # VAR=value before the command
        if j < len(words):
            head = words[j].text.rsplit("/", 1)[-1]
            if head in _PROSE_COMMANDS:
                redirected = any(t.op and t.text in (">", ">>", "&>", "&>>", ">|") for t in toks[start:end])
                for w in words[j + 1 :]:
                    w.prose = "data" if redirected else True
            elif head in _PATTERN_COMMANDS:
                for w in words[j + 1 :]:
                    if w.spaced:
                        w.prose = True
            elif head in _MESSAGE_TOOLS:
                for a, b in zip(words[j + 1 :], words[j + 2 :], strict=False):
                    if a.text in _MESSAGE_OPTS:
                        b.prose = True
        start = end + 1


def _segments(cmd: str, depth: int = 0) -> tuple[list[list[Tok]], list[str]]:
    """``cmd`` as written: each word is lower-cased with ``Tok.cased`` keeping its case, and the
    data comes back as written."""
    toks, data, _open = split_shell(cmd)
    for t in toks:
        t.cased = _aligned(t.text)
        t.text = t.text.lower()
    _mark_prose(toks)
    segs = [toks]
    for t in toks:
        if t.prose == "data":
            data.append(t.cased)
    if depth < _MAX_DEPTH:
        for t in toks:
            if not t.op and t.spaced and not t.prose:
                try:
                    sub, subdata = _segments(t.raw, depth + 1)
                except ShellParseError:
                    continue  # quoted prose that is no command: the word itself still counts
                segs.extend(sub)
                data.extend(subdata)
    return segs, data


def normalize_path_text(kind: str, text: str) -> str:
    """write/edit: the path is the first line; read: the whole text is a path."""
    if kind == "read":
        return text.replace("\\", "/")
    if kind in ("write", "edit"):
        head, sep, rest = text.partition("\n")
        return head.replace("\\", "/") + sep + rest
    return text


def prepare(actions: tuple[str, ...], text: str) -> Prepared:
    """Ready ``text`` (not yet lower-cased) for every term bound to ``actions``."""
    low = text.lower()
    cased = _aligned(text)
    if actions and actions[0] in BASH_KINDS:
        p = Prepared("bash", low, cased)
        try:
            segs, data = _segments(text)
        except ShellParseError:
            p.failed = True
            return p
        p.segments = segs
        p.data = [d.lower() for d in data]
        p.data_cased = [_aligned(d) for d in data]
        data = p.data
        lines = [" ".join(t.text for t in seg) for seg in segs]
        # a term's `|` also matches `|&`: the prefilter sees that line with `|&` as `|` too
        lines += [ln.replace("|&", "|") for ln in lines if "|&" in ln]
        p.norm = "\n".join(lines + data)
        return p
    p = Prepared("text", low)
    p.norm = normalize_path_text(actions[0] if actions else "", low)
    p.cased = normalize_path_text(actions[0] if actions else "", cased)
    return p


# -- terms ------------------------------------------------------------------------------


class Term:
    """A compiled match term. ``key``: the text the index's prefilter looks for (it occurs in
    ``Prepared.norm`` whenever the term matches); ``raw_key``: the same for the raw text
    (``substring:`` terms, data and commands that cannot be split)."""

    __slots__ = ("orig", "mode", "words", "open_end", "key", "raw_key", "length", "stages", "fold", "unless")

    def __init__(self, orig: str, mode: str, words: list[Tok], open_end: bool, key: str, raw_key: str):
        self.orig = orig
        self.mode = mode  # "substring" | "shell" | "word"
        self.words = words
        self.open_end = open_end
        self.key = key
        self.raw_key = raw_key
        self.length = len(key)  # for specificity: the whole term, even when ``key`` is one word of it
        self.stages: list[list[Tok]] | None = None  # the grammar's pipeline stages (``_term_stages``)
        self.fold = False  # ``exact:``: the adjacent-token rule with options folded, as before the grammar
        self.unless: tuple[Term, ...] = ()  # `` unless:`` parts: any of them firing keeps the term silent

    def __repr__(self) -> str:
        return f"Term({self.orig!r}, {self.mode}, {self.words})"


def split_unless(term: str) -> tuple[str, list[str]]:
    """(the term's first part, its `` unless:`` parts); a term without the marker is its own first part."""
    low = term.lower()
    if UNLESS_MARK not in low:
        return term, []
    parts: list[str] = []
    start = 0
    while True:
        i = low.find(UNLESS_MARK, start)
        if i < 0:
            parts.append(term[start:])
            break
        parts.append(term[start:i])
        start = i + len(UNLESS_MARK)
    return parts[0].strip(), [x.strip() for x in parts[1:] if x.strip()]


def compile_term(term: str, action: str) -> Term:
    """A term with `` unless:`` parts is its first part, compiled (its index key is that part's),
    carrying the compiled parts that keep it silent.

    ``term`` as written (``binding.split_terms`` keeps it so): words are folded here, an
    option keeps its case for the match (``-D`` is not ``-d``), and ``Term.orig`` stays as written
    for what the delivery and lint show. ``exact:`` gives the adjacent-token rule of before the
    grammar (no gaps, no wrappers, options folded); ``substring:`` the rule before that."""
    written = term.strip()
    t = written.lower()
    if UNLESS_MARK in t:
        first, rest = split_unless(written)
        out = compile_term(first, action)
        out.orig = written
        out.unless = tuple(compile_term(x, action) for x in rest)
        return out
    if t.startswith(SUBSTRING_MARK):
        body = t[len(SUBSTRING_MARK) :].strip()
        return Term(written, "substring", [], False, body, body)
    exact = t.startswith(EXACT_MARK)
    if exact:
        written = written[len(EXACT_MARK) :].strip()
        t = written.lower()
    if action in BASH_KINDS:
        toks, _data, open_end = split_shell(written, lenient=True)
        for x in toks:
            x.cased = x.text if exact else _aligned(x.text)
            x.text = x.text.lower()
        key = " ".join(x.text for x in toks)
        out = Term(term.strip(), "shell", toks, open_end, key, t)
        out.length = len(key)
        out.fold = exact
        if not exact and not open_end:
            stages = _term_stages(toks)
            if stages is not None:
                out.stages = stages
                out.key = _gram_key(toks)
        return out
    key = normalize_path_text("read", t) if action in ("write", "edit", "read") else t
    return Term(term.strip(), "word", [], False, key, t)


def _is_name(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _member_access(text: str, i: int, j: int) -> bool:
    """``text[i:j]``, a term that starts with ``.``, sits between a name and ``.`` + a name: a
    member access (``process.env.API_URL``), not a file extension (``prod.env``)."""
    return i > 0 and _is_name(text[i - 1]) and text[j : j + 1] == "." and _is_name(text[j + 1 : j + 2])


def _into_path(text: str, j: int) -> bool:
    """After a term that ends in ``.`` or ``/``, the text goes on with more dots or slashes and
    then a name: the term's last character begins a path (``git add ./docs``, ``cd ../x``)."""
    k = j
    while k < len(text) and text[k] in "./":
        k += 1
    return k > j and _is_name(text[k : k + 1])


def _has_ext(term: str) -> bool:
    """``term`` ends in a file name with an extension (``package-lock.json``, ``src/settings.py``):
    a name, a dot, letters or digits."""
    k = term.rfind(".")
    return 0 < k < len(term) - 1 and _is_name(term[k - 1]) and term[k + 1 :].isalnum()


def _ext_runs_on(term: str, text: str, j: int) -> bool:
    """After a term that ends in an extension the text goes on with ``.`` or ``-`` and a letter or
    digit: another extension or a longer name (``package-lock.json.md``,
    ``check-package-lock.json-drift.sh``), so another file."""
    return text[j : j + 1] in (".", "-") and _is_wc(text[j + 1 : j + 2]) and _has_ext(term)


def _joins(text: str, cased: str, k: int, i: int, j: int) -> bool:
    """``text[k]``, next to the match ``text[i:j]``, continues its word: a letter or digit, or
    an underscore before it outside SCREAMING_SNAKE context (``_screaming``). An underscore
    after it ends the word: a name may begin with the term (``id_rsa_work``)."""
    ch = text[k]
    return ch.isalnum() or (ch == "_" and k < i and not _screaming(cased, k, i, j))


def _upper_tail(term: str, cased: str, i: int) -> bool:
    """``term``, a name and ``=`` (``password=``), matched at ``i`` as the tail of an upper-case
    name that ends where the term's ``=`` is (``PGPASSWORD=``, SCREAMING_SNAKE context): an
    environment variable's prefix (``PG``, ``MYSQL_``) names whose secret it is."""
    return (
        len(term) > 1
        and term[-1] == "="
        and all(_is_name(c) for c in term[:-1])
        and i > 0
        and _screaming(cased, i - 1, i, i + len(term))
    )


def word_find(term: str, text: str, cased: str = "") -> bool:
    """``term`` occurs in ``text`` with no letter or digit continuing it at an edge where the
    term itself has a letter or digit (an underscore continues it too, except in SCREAMING_SNAKE
    context, read in ``cased``: ``text`` as written, lower-cased by default), and, for a
    term that starts with ``.``, not as a member access (``_member_access``); a term that
    ends in ``.`` or ``/`` does not go on into a path (``_into_path``)."""
    if not term:
        return False
    cased = cased or text
    first, last = _is_wc(term[0]), _is_wc(term[-1])
    dot = term[0] == "."
    path_end = term[-1] in "./"
    n = len(term)
    i = text.find(term)
    while i >= 0:
        if (
            (not first or i == 0 or not _joins(text, cased, i - 1, i, i + n) or _upper_tail(term, cased, i))
            and (not last or i + n >= len(text) or not _joins(text, cased, i + n, i, i + n))
            and not (dot and _member_access(text, i, i + n))
            and not (path_end and _into_path(text, i + n))
            and not _ext_runs_on(term, text, i + n)
        ):
            return True
        i = text.find(term, i + 1)
    return False


def _word_class(w: str) -> str:
    if not any(c.isalnum() for c in w):
        return "punct"
    if w[0] == "-":
        return "option"
    if all(c.isalnum() or c in "_-" for c in w):
        return "name"
    return "other"


def _joined_right(cw: str, q: int) -> bool:
    """The text continues the word at ``q``: a letter or digit, or a hyphen joining one."""
    if q >= len(cw):
        return False
    c = cw[q]
    return _is_wc(c) or (c == "-" and q + 1 < len(cw) and _is_wc(cw[q + 1]))


def _joined_left(cw: str, p: int, cased: str = "", n: int = 0) -> bool:
    """The text continues the word ``cw[p:p + n]`` before ``p``: a letter or digit, an
    underscore outside SCREAMING_SNAKE context (``cased``: ``cw`` as written), or a hyphen
    joining one."""
    if p <= 0:
        return False
    c = cw[p - 1]
    if c == "_":
        return not _screaming(cased or cw, p - 1, p, p + n)
    return _is_wc(c) or (c == "-" and p >= 2 and _is_wc(cw[p - 2]))


def _left_ok(tw: str, cls: str, cw: str, p: int, cased: str = "") -> bool:
    if p == 0:
        return True
    if cls == "option":
        return False
    if cls == "punct":
        return not any(c.isalnum() for c in cw[:p])
    if cls == "name":
        return cw[p - 1] in _COMPONENT_SEPS or (not _is_wc(tw[0]) or not _joined_left(cw, p, cased, len(tw)))
    return not _is_wc(tw[0]) or not _joined_left(cw, p, cased, len(tw)) or _upper_tail(tw, cased or cw, p)


def _right_ok(tw: str, cls: str, cw: str, q: int, open_end: bool) -> bool:
    if q >= len(cw) or open_end:
        return True
    if _ext_runs_on(tw, cw, q):
        return False
    if cls == "punct":
        if tw[0] == "$":
            return True  # `$`, `${`: an expansion begins here
        return not any(c.isalnum() for c in cw[q:])
    if cls == "option" and tw[1:2] != "-" and tw[1:].isalnum():
        return True  # a short option begins a cluster: -a in -am, -n in -n5
    return not _is_wc(tw[-1]) or not _joined_right(cw, q)


def _stem(comp: str) -> str:
    """A path component without its extension; a leading dot belongs to the name
    (``deploy.sh`` -> ``deploy``, ``.ssh`` stays ``.ssh``)."""
    lead = len(comp) - len(comp.lstrip("."))
    k = comp.find(".", lead)
    return comp if k < 0 else comp[:k]


def _single(tw: str, cw: str, open_end: bool, cased: str = "") -> bool:
    """A one-word term inside one command word (``cased``: the word as written)."""
    cls = _word_class(tw)
    if cls == "name" and not open_end:
        if cw == tw:
            return True
        if tw not in cw:
            return False
        start = 0
        for k in range(len(cw) + 1):
            if k == len(cw) or cw[k] in _COMPONENT_SEPS:
                comp = cw[start:k]
                if comp == tw or _stem(comp) == tw:
                    return True
                start = k + 1
        return False
    n = len(tw)
    i = cw.find(tw)
    while i >= 0:
        if (
            _left_ok(tw, cls, cw, i, cased)
            and _right_ok(tw, cls, cw, i + n, open_end)
            and not (tw[0] == "." and _member_access(cw, i, i + n))
        ):
            return True
        i = cw.find(tw, i + 1)
    return False


def _run_at(words: list[Tok], seg: list[Tok], s: int, open_end: bool, fold: bool = True) -> bool:
    k = len(words)
    for j in range(k):
        tw, ct = words[j], seg[s + j]
        if tw.op != ct.op:
            return False
        if tw.op:
            if tw.text != ct.text and not (tw.text == "|" and ct.text == "|&"):  # |& pipes stderr too
                return False
            continue
        a, b = tw.text, ct.text
        if not fold and _short_option(tw.cased):
            a, b = tw.cased, ct.cased  # a short option is read as written (-D is not -d, -R not -r)
        if j == 0:
            if not b.endswith(a) or not _left_ok(a, _word_class(a), b, len(b) - len(a), ct.cased):
                return False
            if k == 1:
                return False  # handled by _single
        elif j == k - 1:
            if not b.startswith(a) or not _right_ok(a, _word_class(a), b, len(a), open_end):
                return False
        elif a != b:
            return False
    return True


def shell_match(term: Term, p: Prepared) -> bool:
    words = term.words
    if not words:
        return False
    k = len(words)
    if k == 1 and not words[0].op:
        tw = words[0].text
        cased_opt = not term.fold and _short_option(words[0].cased)
        for seg in p.segments:
            for ct in seg:
                if (
                    not ct.op
                    and not ct.prose
                    and not ct.spaced
                    and tw in ct.text
                    and (words[0].cased in ct.cased if cased_opt else True)
                    and (
                        _single(words[0].cased, ct.cased, term.open_end, ct.cased)
                        if cased_opt
                        else _single(tw, ct.text, term.open_end, ct.cased)
                    )
                ):
                    return True
                if not ct.op and ct.spaced and not ct.prose and term.open_end and ct.text.startswith(tw):
                    return True
        return any(word_find(term.raw_key, d, c) for d, c in zip(p.data, p.data_cased, strict=True))
    for seg in p.segments:
        for s in range(len(seg) - k + 1):
            if _run_at(words, seg, s, term.open_end, term.fold):
                return True
    if term.stages is not None and gram_match(term, p):
        return True
    return any(word_find(term.raw_key, d, c) for d, c in zip(p.data, p.data_cased, strict=True))


# -- the term grammar: words in order within one simple command, wrappers seen through ----------
#: commands that run the command after them: (options that take a value)
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "--user", "--group"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o"}),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "stdbuf": frozenset(),
    "xargs": frozenset({"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a", "-i"}),
    "npx": frozenset({"-p", "--package", "-c"}),
    "pnpx": frozenset(),
    "bunx": frozenset(),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "watch": frozenset({"-n", "--interval"}),
    "caffeinate": frozenset(),
}
#: two-word wrappers (``uv run pytest``): the first word, the second
_RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "pdm": "run", "hatch": "run", "bundle": "exec"}
_GRAM_OPS = frozenset({"|", "|&"})
#: option implications, only where the tool's own manual says one option is another plus more:
#: command -> {option as written: the options it also is}. A term's option also fires on a
#: command word that implies it (``tail -f`` on ``tail -F``), never the other way round
#: (``tail -F`` does not fire on ``tail -f``, which does not retry). Sources:
#: ``tail``: GNU coreutils tail(1), "-F  same as --follow=name --retry"; "-f, --follow".
OPTION_IMPLIES: dict[str, dict[str, frozenset[str]]] = {
    "tail": {"-F": frozenset({"-f", "--follow"})},
}


def _is_option(text: str) -> bool:
    return len(text) > 1 and text[0] == "-" and any(c.isalnum() for c in text)


def _term_stages(toks: list[Tok]) -> list[list[Tok]] | None:
    """A term made of words and ``|`` as its pipeline stages (a leading ``|`` gives an empty
    first stage: any command); None for a term the grammar does not read (other operators,
    one word alone), which keeps the adjacent-token rule only."""
    if not toks or any(t.op and t.text not in _GRAM_OPS for t in toks):
        return None
    stages: list[list[Tok]] = [[]]
    for t in toks:
        if t.op:
            stages.append([])
        else:
            stages[-1].append(t)
    if len(stages) == 1 and len(stages[0]) < 2:
        return None
    if any(not st for st in stages[1:]):
        return None  # `curl |`: a trailing pipe names no command
    return stages


def _gram_key(toks: list[Tok]) -> str:
    """The prefilter key of a grammar term: its longest word (every word of a match is in the
    command, but no longer side by side)."""
    words = [t.text for t in toks if not t.op]
    implied = OPTION_IMPLIES.get(words[0], {}) if words else {}
    if implied:  # an option a command's other option implies may be absent from the command
        gone = {o.lower() for also in implied.values() for o in also}
        words = [w for w in words if w not in gone] or words
    named = [w for w in words if any(c.isalnum() for c in w)] or words
    rare = [w for w in named if w not in COMMON_SHELL_WORDS] or named
    # the longest uncommon word, the later on a tie: `npm ci` is keyed by `ci`, not by every npm
    # command's `npm` (a key shared by many terms sends them all to Python on each such command)
    best = rare[0]
    for w in rare[1:]:
        if len(w) >= len(best):
            best = w
    return best


def _base(text: str) -> str:
    return text.replace("\\\\", "/").rsplit("/", 1)[-1]


def _heads(words: list[Tok]) -> list[int]:
    """The positions in one simple command where a command starts: its first word after
    assignments, and the command after each wrapper (``sudo -u x``, ``env A=1``, ``nice -n 5``,
    ``xargs -I {}``, ``timeout 10``, ``python -m``, ``npx -y``, ``uv run``)."""
    out: list[int] = []
    n = len(words)
    i = 0
    while i < n:
        while i < n and "=" in words[i].text and not words[i].text.startswith("-") and words[i].text[0] != "=":
            i += 1  # VAR=value
        if i >= n:
            break
        out.append(i)
        head = _base(words[i].text)
        if head in _WRAPPERS:
            vals = _WRAPPERS[head]
            i += 1
            while i < n and (_is_option(words[i].cased) or words[i].text == "--"):
                i += 2 if words[i].cased in vals else 1
            if head == "timeout" and i < n and words[i].text[:1].isdigit():
                i += 1
            continue
        if head in _RUNNERS and i + 1 < n and words[i + 1].text == _RUNNERS[head]:
            i += 2
            while i < n and _is_option(words[i].cased):
                i += 1
            continue
        if head == "python" or (head.startswith("python") and head[6:].replace(".", "").isdigit()):
            k = i + 1
            while k < n and _is_option(words[k].cased) and words[k].text != "-m":
                k += 1
            if k + 1 < n and words[k].text == "-m":
                i = k + 1
                continue
        break
    return out


def _simple_commands(p: Prepared) -> list[list[tuple[list[Tok], list[int]]]]:
    """The pipelines of every segment (the command and each nested quoted command), each a list
    of stages: (the stage's words, with redirections and prose dropped; where commands start).
    Made once per action."""
    hit = p._cache.get("stages")
    if hit is not None:
        return hit
    pipes: list[list[tuple[list[Tok], list[int]]]] = []
    for seg in p.segments:
        cur: list[list[Tok]] = [[]]
        skip = False
        n = len(seg)
        for k, t in enumerate(seg):
            if t.op:
                if t.text in _GRAM_OPS:
                    cur.append([])
                elif t.text in _CONTROL_OPS:
                    pipes.append([(w, _heads(w)) for w in cur if w])
                    cur = [[]]
                else:
                    skip = True  # a redirection: its target is no word of the command
                continue
            if skip:
                skip = False
                continue
            nxt = seg[k + 1] if k + 1 < n else None
            if t.text.isdigit() and nxt is not None and nxt.op and nxt.text not in _CONTROL_OPS:
                continue
            cur[-1].append(t)
        pipes.append([(w, _heads(w)) for w in cur if w])
    pipes = [pl for pl in pipes if pl]
    p._cache["stages"] = pipes
    return pipes


def _short_option(text: str) -> bool:
    """A single-dash option (``-D``, ``-rf``): its case is its meaning (``git branch -D`` deletes
    what ``-d`` refuses to, ``chmod -R`` recurses where ``-r`` removes read). A long option's
    name folds (``--testNamePattern`` is ``--testnamepattern``: no tool tells them apart)."""
    return len(text) > 1 and text[0] == "-" and text[1] != "-" and any(c.isalpha() for c in text)


#: public name of the rule for modules outside delivery (the Gardener mints terms by it)
is_short_option = _short_option


def _opt_hit(tw: Tok, ct: Tok) -> bool:
    """An option word of a term on a command word: a short option case-sensitive (``-D`` is not
    ``-d``), a long one folded; a single-letter option may begin a cluster (``-a`` in ``-am``)."""
    a, b = (tw.cased, ct.cased) if _short_option(tw.cased) else (tw.text, ct.text)
    if a == b:
        return True
    if a[1:2] != "-" and a[1:].isalnum() and len(a) == 2 and b.startswith(a) and b[1:].isalnum():
        return True
    return "=" in b and b.split("=", 1)[0] == a  # --output=x for --output


def _word_hit(tw: Tok, ct: Tok, last: bool, open_end: bool) -> bool:
    if ct.op or ct.prose or ct.spaced:
        return False
    if _is_option(tw.text):
        return _opt_hit(tw, ct)
    a, b = tw.text, ct.text
    if a == b:
        return True
    if last and b.startswith(a) and _right_ok(a, _word_class(a), b, len(a), open_end):
        return True
    return a in b and _word_class(a) != "name" and _single(a, b, open_end, ct.cased)


def _head_hit(tw: Tok, ct: Tok) -> bool:
    a, b = tw.text, ct.text
    if a == b or _base(b) == a:
        return True
    base = _base(b)
    return _word_class(a) == "name" and _stem(base) == a and base != a


def _skippable(words: list[Tok], i: int, j: int) -> bool:
    """``words[i:j]`` are options and their values only (``-C dir``, ``-n prod``, ``--no-pager``)."""
    for m in range(i, j):
        w = words[m].cased
        if _is_option(w) or w == "--":
            continue
        prev = words[m - 1].cased if m > i else ""
        if prev and _is_option(prev) and "=" not in prev and not words[m].spaced:
            continue
        return False
    return True


def _stage_match(tws: list[Tok], words: list[Tok], heads: list[int], open_end: bool) -> bool:
    """The grammar on one simple command: the term's first word is a command (a wrapper's too),
    the words up to its first option follow it with only options and their values between
    (``git -C dir reset``), the rest follow in order anywhere after (``git push origin main
    --force``)."""
    if not tws:
        return True
    k = len(tws)
    for h in heads:
        if not _head_hit(tws[0], words[h]):
            continue
        implies = OPTION_IMPLIES.get(tws[0].text)
        pos = h + 1
        j = 1
        ok = True
        while j < k and not _is_option(tws[j].text):
            at = next(
                (m for m in range(pos, len(words)) if _word_hit(tws[j], words[m], j == k - 1, open_end)),
                -1,
            )
            if at < 0 or not _skippable(words, pos, at):
                ok = False
                break
            pos, j = at + 1, j + 1
        while ok and j < k:
            at = next(
                (
                    m
                    for m in range(pos, len(words))
                    if _word_hit(tws[j], words[m], j == k - 1, open_end) or _implied(implies, tws[j], words[m])
                ),
                -1,
            )
            if at < 0:
                ok = False
                break
            pos, j = at + 1, j + 1
        if ok:
            return True
    return False


def _implied(implies: dict[str, frozenset[str]] | None, tw: Tok, ct: Tok) -> bool:
    """The term's option ``tw`` is implied by the command word ``ct`` (``OPTION_IMPLIES``)."""
    if not implies or ct.op or ct.prose or ct.spaced:
        return False
    also = implies.get(ct.cased)
    return also is not None and (tw.cased if _short_option(tw.cased) else tw.text) in also


def gram_match(term: Term, p: Prepared) -> bool:
    """A grammar term (``Term.stages``) on a prepared command: its stages match stages of one
    pipeline in order (``curl | sh`` on ``curl -fsSL URL | sudo sh -s``)."""
    stages = term.stages
    if not stages:
        return False
    lead_any = not stages[0]
    want = stages[1:] if lead_any else stages
    for pipe in _simple_commands(p):
        si = 0
        for words, heads in pipe[1 if lead_any else 0 :]:
            if _stage_match(want[si], words, heads, term.open_end):
                si += 1
                if si == len(want):
                    return True
    return False
    for pipe in _simple_commands(p):
        si = 0
        lead_any = not stages[0]
        for idx, (words, heads) in enumerate(pipe):
            if si == 0 and lead_any:
                if idx == 0:
                    continue  # `| tail`: some command first, then the piped one
                si = 1
            if si < len(stages) and _stage_match(stages[si], words, heads, term.open_end):
                si += 1
                if si == len(stages):
                    return True
            elif si > (1 if lead_any else 0) - 1 and si and not lead_any:
                pass
    return False


def matches(term: Term, p: Prepared) -> bool:
    """Whether ``term`` fires on the prepared action (and none of its `` unless:`` parts does)."""
    if term.unless and any(_matches(u, p) for u in term.unless):
        return False
    return _matches(term, p)


def _matches(term: Term, p: Prepared) -> bool:
    if term.mode == "substring":
        return bool(term.key) and term.key in p.raw
    if term.mode == "word" or p.kind != "bash":
        if p.kind == "bash":  # a word-mode term on a command (not bound to bash): plain word rule
            return word_find(term.orig.lower(), p.raw, p.cased)
        return word_find(term.key, p.norm, p.cased)
    if p.failed:
        return word_find(term.raw_key, p.raw, p.cased)
    return shell_match(term, p)


def term_matches(term: str, actions: tuple[str, ...], text: str) -> bool:
    """One-off check (tests, lint, ``geode deliver``): does ``term`` fire on ``text``?"""
    return matches(compile_term(term, actions[0]), prepare(actions, text))


def specificity(length: int, carriers: int) -> float:
    """How specific a term is: its length in characters, one character less for every
    doubling of the crystals that carry it (``git commit`` on 300 crystals ranks below
    ``terraform destroy`` on one). The original product (docs/DESIGN.md, "Lessons") measured, on its own ledger, that 71 %
    of actions with a key of eight characters or more were changed by the note against 33 % for
    shorter keys; geode has not measured this itself."""
    c = max(1, int(carriers))
    doublings = c.bit_length() - 1
    return float(length) - doublings


# -- what lint says about a term (lean: the Stop hook's template uses it too) -----------------

#: shell words so common that, alone, they fire on a large share of all commands
COMMON_SHELL_WORDS = frozenset(
    {
        "ls",
        "cd",
        "cat",
        "echo",
        "git",
        "npm",
        "rm",
        "cp",
        "mv",
        "grep",
        "find",
        "make",
        "python",
        "python3",
        "node",
        "sudo",
        "bash",
        "sh",
        "pip",
        "test",
        "run",
        "mkdir",
        "touch",
        "pwd",
        "head",
        "tail",
        "less",
        "sed",
        "awk",
        "xargs",
        "sort",
        "wc",
        "env",
        "export",
        "source",
        "set",
        "true",
        "false",
        "exit",
        "read",
        "which",
        "uv",
        "yarn",
        "pnpm",
        "npx",
        "go",
        "cargo",
        "docker",
    }
)
_PROBE_AFTER = ("/x", ".x", "=x", " x")
_PROBE_BEFORE = ("/", "=", "x ")


def _glued(term: str) -> str:
    """The term with the spaces around its shell operators removed (``| tail`` -> ``|tail``)."""
    out = []
    for i, ch in enumerate(term):
        if ch == " " and ((i > 0 and term[i - 1] in "|&;<>") or (i + 1 < len(term) and term[i + 1] in "|&;<>")):
            continue
        out.append(ch)
    return "".join(out)


def meaning_changes(term: str, action: str) -> tuple[list[str], list[str]]:
    """(texts the substring rule fired on and this rule does not, texts it fires on now that the
    substring rule did not) among probes around the term: the term followed by ``/x``, ``.x``,
    ``=x``, preceded by ``/``, ``=``, spaced or glued around its operators, without its quotes.
    A letter or digit continuing the term is left out: that change is the same for every term
    (README, "Migrating from substring matching")."""
    t = term.lower().strip()
    if t.startswith(SUBSTRING_MARK) or not t or action not in BASH_KINDS:
        return [], []  # the word rule differs from a substring only by a letter or digit at an edge
    probes = [t + x for x in _PROBE_AFTER] + [x + t for x in _PROBE_BEFORE]
    if action in BASH_KINDS:
        spaced = " ".join(x.text for x in split_shell(t, lenient=True)[0])
        probes += [spaced, _glued(t), t.replace('"', "").replace("'", "")]
    narrowed, widened = [], []
    acts = (action,)
    for probe in dict.fromkeys(p for p in probes if p):
        old = t in probe
        try:
            new = term_matches(t, acts, probe)
        except (ShellParseError, ValueError, IndexError):  # a probe the splitter rejects is no evidence either way
            continue
        if old and not new:
            narrowed.append(probe)
        elif new and not old:
            widened.append(probe)
    return narrowed, widened


def term_problems(term: str, action: str) -> list[tuple[str, str, str]]:
    """(code, severity, message) for one term bound to one action: too broad, never matching,
    or meaning something else than under the substring rule."""
    written = term.strip()  # shown and matched as written: an option's case is part of the term
    t = written.lower()
    if UNLESS_MARK in t:
        first, rest = split_unless(written)
        if not rest:
            return [("match-never", "warning", f"term {term!r} has an empty 'unless:' part")]
        found = term_problems(first, action)
        if not found and not term_matches(written, (action,), first):
            found.append(
                (
                    "match-never",
                    "warning",
                    f"term {term!r}: an 'unless:' part fires on {first!r} itself; the term never fires",
                )
            )
        return found
    out: list[tuple[str, str, str]] = []
    body = written[len(SUBSTRING_MARK) :].strip() if t.startswith(SUBSTRING_MARK) else written
    if not body:
        return [("match-never", "warning", f"term {term!r} is empty after {SUBSTRING_MARK!r}; it never matches")]
    if len(body) == 2:
        out.append(
            (
                "match-too-broad",
                "warning",
                f"term {body!r} is two characters; it fires on too many actions (make it longer)",
            )
        )
    if action in BASH_KINDS and not t.startswith(SUBSTRING_MARK):
        words = split_shell(written, lenient=True)[0]
        if not words:
            out.append(
                (
                    "match-never",
                    "warning",
                    f"term {term!r} holds no shell word (a comment or empty quotes); it never matches a command",
                )
            )
            return out
        if not term_matches(written, (action,), written):
            out.append(
                (
                    "match-never",
                    "warning",
                    f"term {term!r} does not even match a command that is exactly "
                    "itself under token matching; it never fires (write it as a command, or use 'substring:')",
                )
            )
            return out
        if len(words) == 1 and words[0].text.lower() in COMMON_SHELL_WORDS:
            out.append(
                (
                    "match-too-broad",
                    "warning",
                    f"term {term!r} is a common shell word; alone it fires on a large share of all commands "
                    f"(add context: '{words[0].text} <what you mean>')",
                )
            )
    # only what a store written for the substring rule loses: the spellings it gains (`|tail`
    # for `| tail`) are the same command, and two terms that became one are a duplicate warning
    narrowed, _widened = meaning_changes(t, action)
    if narrowed:
        out.append(
            (
                "match-meaning-changed",
                "info",
                f"term {term!r} no longer fires on "
                + ", ".join(repr(p) for p in narrowed[:3])
                + f" (token-aware matching; write '{SUBSTRING_MARK}{written}' for the old substring rule)",
            )
        )
    return out


# -- what lint says about a term under the grammar ---------------------------------------------


def grammar_forms(term: str) -> list[str]:
    """Commands a grammar term is written for, built from the term itself: the term; an option
    and its value between each pair of its words (``git -x v push -x v --force``); behind
    ``sudo``; as the second stage of a pipe; inside ``sh -c '...'``. A term that fires on none of
    them cannot be reached by any form of its command (lint ``match-unreachable``)."""
    toks = split_shell(term.strip(), lenient=True)[0]
    plain = [t.text for t in toks]
    if not plain:
        return []
    spread = " -x v ".join(plain)
    body = " ".join(plain)
    return [term.strip(), body, spread, "sudo " + body, "true | " + body, "sh -c '" + body.replace("'", "") + "'"]


def unreachable(term: str, action: str) -> list[str]:
    """The forms tried (``grammar_forms``) when the term fires on none of them, else []: a term
    of the grammar (``bash``, ``commit``) that no form of its command can reach."""
    if action not in BASH_KINDS:
        return []
    low = term.strip().lower()
    if low.startswith(SUBSTRING_MARK) or low.startswith(EXACT_MARK):
        return []
    forms = grammar_forms(split_unless(term)[0])
    if not forms:
        return [term.strip()]  # no shell word at all (a comment, empty quotes)
    acts = (action,)
    for f in forms:
        try:
            if term_matches(term, acts, f):
                return []
        except (ShellParseError, ValueError, IndexError):
            continue
    return forms


def term_form(term: Term) -> str:
    """What makes two compiled terms the same term: their tokens, words folded and short
    options as written (``git branch -D`` and ``-d`` are two terms; ``| tail`` and ``|tail`` one)."""
    unless = "".join(UNLESS_MARK + term_form(u) for u in term.unless)
    if not term.words:
        return term.key + unless
    return " ".join(x.cased if not term.fold and _short_option(x.cased) else x.text for x in term.words) + unless
