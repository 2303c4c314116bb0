"""Note frontmatter: a YAML subset, standard library only, with line numbers, that means what
YAML means, and hands what it does not read to the full parser.

Why a subset: the hook must import only the standard library, and it re-parses a crystal whose
file changed right before delivering it. One parser serves the hook, the CLI and the agents, so
a note means the same thing everywhere.

The contract (tests/test_frontmatter_yaml.py checks it against PyYAML, with hypothesis and a
corpus of real frontmatters): on every document the subset reads without a warning, its value
equals PyYAML's ``safe_load`` under this mapping, the one ``geode.kernel.frontmatter_full``
implements for the documents the subset declines:

- timestamps stay their ISO text (``2026-06-01`` is ``"2026-06-01"``: ISO text compares well);
- mapping keys are their text: a plain key is not resolved (``on:`` is ``"on"``, not ``True``;
  ``1:`` is ``"1"``), and a key that is not a scalar is an error;
- an empty frontmatter is ``{}``;
- everything else is YAML 1.1 as PyYAML reads it: ``yes/no/on/off`` are booleans, ``010`` is 8,
  ``1:30`` is 90, ``1e5`` is text, ``"caf\\u00e9"`` is ``café``.

What it reads: block mappings nested by indentation, block lists (``- item``, ``-`` for null,
``- - x``), flow lists and mappings (quoted keys, comments, over several lines), single and
double quoted strings (all escapes, folded over lines), plain scalars continued on the next
lines, block scalars (``|``, ``>``, with ``-``/``+``), comments. What it declines
(``NotInSubset``): anchors, aliases, tags, explicit keys (``?``), merge keys, explicit block
indentation indicators, directives and document markers, characters YAML forbids, and a few
corners where it cannot be sure (a flow key that is a collection, a plain scalar spread over
lines inside a flow collection). Off the hook, ``parse_frontmatter`` then reads the note with
the full parser and adds an ``outside-hook-subset`` warning; the hook (``FULL_PARSER`` off)
skips the note, never reads it wrong, and the binding index remembers it, so the next refresh
off the hook reads it in full (``Index.hook_unreadable``, doctor's ``hook-reader`` check).

Leniency, each recorded as a warning rather than an error (strict YAML rejects these):
- crystal-memory stores write ``match: | tail, |tail, | head``. Strict YAML reads the
  leading ``|`` as a block scalar and rejects the line; those crystals must still fire, so
  text after ``|`` or ``>`` on the same line is read as a plain string.
- Cursor rules write ``globs: **/*.py``; strict YAML reads ``*`` as an alias. It is read as
  text with a warning that tells the author to quote it (``@`` and a backtick likewise).
- ``description: one line: what it is`` (a colon and a space inside a plain value) is read as
  the text after the key's colon (``unquoted-colon``).
- a key given twice: the last value wins (as in PyYAML), with ``duplicate-key``.
- only where the full parser rejects the document anyway (so never on the hook, which cannot
  know): ``&x``, ``!x`` and ``*x`` values are read as text (``unquoted-special``) and a tab in a
  plain value as a separator (``tab-in-value``: Hugo's docs write ``weight: 30<TAB>#rem``).

Errors (``FrontmatterError``) carry the 1-based line number inside the file.
"""

from __future__ import annotations

from geode.kernel.errors import GeodeError, StoreError


class FrontmatterError(StoreError, ValueError):
    """The frontmatter cannot be read; ``line`` is 1-based within the file."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class NotInSubset(FrontmatterError):
    """Valid-looking YAML this reader does not read (an anchor, a tag, ...). Off the hook the
    full parser reads the note; on the hook the note is skipped (never read wrong)."""


#: Off (set by the hook's entry point) the hook stays standard-library only: a note the subset
#: declines is an error there (the note is skipped), never handed to PyYAML.
FULL_PARSER = True

#: the most frontmatter (the text between the fences) either reader is given: a note's keys
#: are a few hundred characters; a file of megabytes between fences is no note's metadata
MAX_FRONTMATTER_CHARS = 65_536


class ParsedFrontmatter:
    """``data``; ``lines``: key path ("crystal.match") -> 1-based line of the key;
    ``warnings``: (line, code, message) for constructs read leniently.

    A plain class, not a dataclass: ``dataclasses`` costs the hook ~8 ms of imports."""

    __slots__ = ("data", "lines", "warnings")

    def __init__(self, data: dict):
        self.data = data
        self.lines: dict[str, int] = {}
        self.warnings: list[tuple[int, str, str]] = []


# -- plain scalars: PyYAML's implicit resolvers, by hand (the hook may not import ``re``) ------------
_WORDS: dict = {"": None, "~": None, "null": None, "Null": None, "NULL": None}
for _w in ("yes", "true", "on"):
    _WORDS.update({_w: True, _w.capitalize(): True, _w.upper(): True})
for _w in ("no", "false", "off"):
    _WORDS.update({_w: False, _w.capitalize(): False, _w.upper(): False})
_MISS = object()
_DIG = "0123456789"
_DIG_ = "0123456789_"
_HEX_ = "0123456789abcdefABCDEF_"


class _Decline(GeodeError):
    """Internal: a plain scalar outside the subset (never leaves this module)."""


def _only(text: str, allowed: str) -> bool:
    return text != "" and all(ch in allowed for ch in text)


def _sexa(part: str) -> bool:
    """``[0-5]?[0-9]``"""
    return (len(part) == 1 and part in _DIG) or (len(part) == 2 and part[0] in "012345" and part[1] in _DIG)


def _exponent(text: str) -> bool:
    """``(?:[eE][-+][0-9]+)?``"""
    return text == "" or (len(text) > 2 and text[0] in "eE" and text[1] in "+-" and _only(text[2:], _DIG))


def _base60(parts: list[str], kind) -> int | float:
    value = kind(0)
    base = 1
    for part in reversed(parts):
        value += kind(part) * base
        base *= 60
    return value


def _number(t: str):
    """``t`` as PyYAML's int and float resolvers read it, or ``t`` itself when it is text."""
    s = t
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if not s:
        return t
    try:
        # int: 0b..., 0..., decimal, 0x..., base 60
        if s[:2] == "0b" and _only(s[2:], "01_"):
            return sign * int(s[2:].replace("_", ""), 2)
        if s[:2] == "0x" and _only(s[2:], _HEX_):
            return sign * int(s[2:].replace("_", ""), 16)
        if s[0] == "0" and len(s) > 1 and _only(s[1:], "01234567_"):
            return sign * int(s.replace("_", ""), 8)
        if s == "0" or (s[0] in "123456789" and (len(s) == 1 or _only(s[1:], _DIG_))):
            return sign * int(s.replace("_", ""))
        if s[0] in "123456789" and ":" in s:
            parts = s.replace("_", "").split(":")
            if _only(s.split(":")[0], _DIG_) and all(_sexa(p) for p in parts[1:]):
                return sign * _base60(parts, int)
        # float
        if s[0] in _DIG and "." in s:
            whole, frac = s.split(".", 1)
            if ":" not in whole:
                cut = len(frac)
                for k, ch in enumerate(frac):
                    if ch in "eE":
                        cut = k
                        break
                if _only(whole, _DIG_) and (frac[:cut] == "" or _only(frac[:cut], _DIG_)) and _exponent(frac[cut:]):
                    return sign * float(s.replace("_", ""))
            else:
                parts = whole.split(":")
                if _only(parts[0], _DIG_) and all(_sexa(p) for p in parts[1:]) and (frac == "" or _only(frac, _DIG_)):
                    return sign * _base60(s.replace("_", "").split(":"), float)
        if s in (".inf", ".Inf", ".INF"):
            return sign * float("inf")
        if t[0] == "." and len(t) > 1 and t[1] in _DIG:
            cut = len(t)
            for k, ch in enumerate(t):
                if ch in "eE":
                    cut = k
                    break
            if _only(t[1:cut], _DIG_) and _exponent(t[cut:]):
                return float(t.replace("_", ""))
        if t in (".nan", ".NaN", ".NAN"):
            return float("nan")
    except ValueError:  # e.g. 0b_ (PyYAML fails on it too, with a ValueError)
        raise _Decline(f"{t!r} is a number PyYAML cannot read") from None
    return t


def _resolve(t: str):
    """A plain scalar's value, as PyYAML's implicit resolvers give it (timestamps stay text)."""
    v = _WORDS.get(t, _MISS)
    if v is not _MISS:
        return v
    if t[0] in "-+0123456789.":
        return _number(t)
    if t in ("=", "<<"):
        raise _Decline(f"{t!r} is a YAML value or merge key")
    return t


# -- quoted scalars (over several lines) ----------------------------------------------------------
_ESCAPES = {
    "0": "\0",
    "a": "\x07",
    "b": "\x08",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\x0b",
    "f": "\x0c",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "\\": "\\",
    "/": "/",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}


class _Incomplete(GeodeError):
    """Internal: a quoted or flow value continues on the next line (never leaves this module)."""


def _is_marker(s: str, j: int) -> bool:
    """A document marker (``---``, ``...``) at the start of the line at ``j``."""
    return s[j : j + 3] in ("---", "...") and (j + 3 == len(s) or s[j + 3] in " \t\n")


def _scan_quoted(s: str, j: int) -> tuple[str, int]:
    """The quoted scalar opening at ``s[j]``, folded over line breaks as YAML folds it;
    ``(value, index after the closing quote)``. ``_Incomplete`` when ``s`` ends first."""
    q = s[j]
    # the common case: closed on the same line, no escapes
    end = s.find(q, j + 1)
    if end > 0 and s[end + 1 : end + 2] != q:
        body = s[j + 1 : end]
        if "\n" not in body and (q == "'" or "\\" not in body):
            return body, end + 1
    out: list[str] = []
    j += 1
    n = len(s)
    while True:
        if j >= n:
            raise _Incomplete()
        ch = s[j]
        if ch == q:
            if q == "'" and s[j + 1 : j + 2] == "'":
                out.append("'")
                j += 2
                continue
            return "".join(out), j + 1
        if q == '"' and ch == "\\":
            if j + 1 >= n:
                raise _Incomplete()
            e = s[j + 1]
            if e == "\n":  # an escaped line break: no space, the next line's indentation dropped
                j, breaks = _fold_breaks(s, j + 2)
                out.append("\n" * breaks)
                continue
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                j += 2
                continue
            if e in _HEX_LEN:
                digits = s[j + 2 : j + 2 + _HEX_LEN[e]]
                if len(digits) < _HEX_LEN[e] and "\n" not in digits:
                    raise _Incomplete()
                if len(digits) != _HEX_LEN[e] or not _only(digits, _HEX_[:-1]):
                    raise ValueError(f"\\{e} needs {_HEX_LEN[e]} hexadecimal digits, found {digits!r}")
                code = int(digits, 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise _Decline(f"\\{e}{digits} is not a character")
                out.append(chr(code))
                j += 2 + _HEX_LEN[e]
                continue
            raise ValueError(f"unknown escape \\{e} in a double-quoted string")
        if ch in " \t\n":
            k = j
            while k < n and s[k] in " \t":
                k += 1
            if k >= n:
                raise _Incomplete()
            if s[k] != "\n":
                out.append(s[j:k])
                j = k
                continue
            j, breaks = _fold_breaks(s, k + 1)
            out.append(" " if breaks == 0 else "\n" * breaks)
            continue
        out.append(ch)
        j += 1


def _fold_breaks(s: str, j: int) -> tuple[int, int]:
    """After a line break at ``j - 1``: skip the next lines' indentation and count blank lines."""
    breaks = 0
    n = len(s)
    while True:
        if _is_marker(s, j):
            raise _Decline("a document marker inside a quoted string")
        while j < n and s[j] in " \t":
            j += 1
        if j >= n:
            raise _Incomplete()
        if s[j] != "\n":
            return j, breaks
        breaks += 1
        j += 1


# -- flow collections ------------------------------------------------------------------------------
def _skip_ws(s: str, j: int) -> int:
    """Spaces, line breaks and comments inside a flow collection."""
    n = len(s)
    while j < n:
        ch = s[j]
        if ch == " " or ch == "\n":
            j += 1
        elif ch == "\t":
            raise _Decline("a tab inside a flow collection")
        elif ch == "#":  # between tokens a '#' opens a comment, as in PyYAML's scanner
            nl = s.find("\n", j)
            if nl < 0:
                return n
            j = nl
        else:
            break
    return j


def _flow_plain(s: str, j: int) -> tuple[str, int]:
    """A plain scalar inside a flow collection: its text and the index where it stops."""
    ch = s[j]
    if ch in "#&*!|>%@`?:" or (ch == "-" and s[j + 1 : j + 2] in ("", " ", "\n")):
        raise _Decline(f"{ch!r} inside a flow collection")
    if ch in ",]}":
        raise ValueError(f"an empty entry in a flow collection near {s[j : j + 20]!r}")
    n = len(s)
    k = j
    while k < n:
        c = s[k]
        if c in ",[]{}" or c == "\n":
            break
        if c == ":" and (k + 1 >= n or s[k + 1] in " \n,[]{}"):
            break
        if c == "#" and s[k - 1] == " ":
            break
        if c in "?\t":
            raise _Decline(f"{c!r} inside a flow collection")
        k += 1
    if k >= n:
        raise _Incomplete()
    text = s[j:k].rstrip(" ")
    if s[k] == "\n" or (s[k] == "#" and k > j):
        # a plain scalar that goes on after the line break is folded; the subset reads one line
        nxt = _skip_ws(s, k)
        if nxt >= n:
            raise _Incomplete()
        if s[nxt] not in ",]}:" and "#" not in s[k:nxt]:
            raise _Decline("a plain scalar over several lines inside a flow collection")
    return text, k


def _flow_node(s: str, j: int):
    """The flow node starting at or after ``j``: ``(value, index after it)``."""
    j = _skip_ws(s, j)
    if j >= len(s):
        raise _Incomplete()
    ch = s[j]
    if ch == "[":
        items: list = []
        j += 1
        while True:
            j = _skip_ws(s, j)
            if j >= len(s):
                raise _Incomplete()
            if s[j] == "]":
                return items, j + 1
            val, j = _flow_node(s, j)
            j = _skip_ws(s, j)
            if j >= len(s):
                raise _Incomplete()
            if s[j] == ":":
                raise _Decline("a key: value pair inside a flow list")
            items.append(val)
            if s[j] == ",":
                j += 1
            elif s[j] != "]":
                raise ValueError(f"expected ',' or ']' in a flow list near {s[j : j + 20]!r}")
    if ch == "{":
        result: dict = {}
        j += 1
        while True:
            j = _skip_ws(s, j)
            if j >= len(s):
                raise _Incomplete()
            if s[j] == "}":
                return result, j + 1
            if s[j] in "[{":
                raise _Decline("a flow key that is a collection")
            if s[j] in "'\"":
                key, j = _scan_quoted(s, j)
            else:
                key, j = _flow_plain(s, j)
                if key == "" or key == "<<":
                    raise _Decline("an empty or merge key in a flow mapping")
            k = _skip_ws(s, j)
            if k >= len(s):
                raise _Incomplete()
            if "\n" in s[j:k] and s[k] == ":":
                raise _Decline("a flow key and its colon on different lines")
            j = k
            val = None
            if s[j] == ":":
                j = _skip_ws(s, j + 1)
                if j >= len(s):
                    raise _Incomplete()
                if s[j] not in ",}":
                    val, j = _flow_node(s, j)
                    j = _skip_ws(s, j)
                    if j >= len(s):
                        raise _Incomplete()
            result[key] = val
            if s[j] == ",":
                j += 1
            elif s[j] != "}":
                raise ValueError(f"expected ',' or '}}' in a flow mapping near {s[j : j + 20]!r}")
    if ch in "'\"":
        return _scan_quoted(s, j)
    text, k = _flow_plain(s, j)
    return _resolve(text), k


# -- the block structure ---------------------------------------------------------------------------
#: characters PyYAML refuses anywhere in a document, and YAML 1.1 line breaks other than \n
_BAD = frozenset(
    [chr(c) for c in range(32) if c not in (9, 10)]
    + [chr(c) for c in range(0x7F, 0xA0) if c != 0x85]
    + ["\x85", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff"]
)


def _bad_char(text: str) -> str | None:
    """The first character the subset does not take (surrogates included), or None."""
    plain = text.replace("\n", "").replace("\t", "")
    if plain.isascii() and plain.isprintable():
        return None
    for ch in text:
        if ch in _BAD or "\ud800" <= ch <= "\udfff":
            return ch
    return None


class _Parser:
    def __init__(self, lines: list[str], first_line: int, lenient: bool = False):
        self.lines = lines
        self.first = first_line  # file line number of lines[0]
        #: read ``&x``, ``!x`` and ``*x`` as text with a warning instead of declining: only for a
        #: document the full parser rejects anyway (the crystal-memory reading of old)
        self.lenient = lenient
        self.i = 0
        self.out = ParsedFrontmatter({})

    # -- helpers ---------------------------------------------------------
    def lineno(self, i: int | None = None) -> int:
        return self.first + (self.i if i is None else i)

    def err(self, message: str, i: int | None = None) -> FrontmatterError:
        return FrontmatterError(self.lineno(i), message)

    def decline(self, message: str, i: int | None = None) -> NotInSubset:
        return NotInSubset(self.lineno(i), f"not in the hook's YAML subset: {message}")

    def warn(self, code: str, message: str, i: int | None = None) -> None:
        self.out.warnings.append((self.lineno(i), code, message))

    def skip_blank(self) -> None:
        while self.i < len(self.lines):
            s = self.lines[self.i].strip(" ")
            if s and not s.startswith("#"):
                return
            self.i += 1

    def indent_at(self, i: int) -> int:
        """Indentation of line ``i``; a tab in it is an error (YAML indents with spaces)."""
        line = self.lines[i]
        ind = len(line) - len(line.lstrip(" "))
        if line[ind : ind + 1] == "\t":
            raise self.err("a tab in indentation; YAML indents with spaces only", i)
        return ind

    @staticmethod
    def indent_of(line: str) -> int:
        return len(line) - len(line.lstrip(" "))

    # -- structure -------------------------------------------------------
    def parse(self) -> ParsedFrontmatter:
        for n, line in enumerate(self.lines):
            if ("\t" in line and not line.strip(" \t")) or line[:1] == "%" or _is_marker(line, 0):
                raise self.decline("a directive, a document marker or a line of only spaces and tabs", n)
        self.skip_blank()
        if self.i >= len(self.lines):
            return self.out
        first = self.lines[self.i].lstrip(" ")
        if first.startswith("- ") or first == "-":
            raise self.err("frontmatter must be a mapping of keys, not a list")
        self.out.data = self.block_mapping(self.indent_at(self.i), "")
        self.skip_blank()
        if self.i < len(self.lines):
            raise self.err(f"unexpected indentation: {self.lines[self.i].strip()[:40]!r}")
        return self.out

    def key_of(self, content: str, i: int) -> tuple[str, str] | None:
        """``(key, rest of the line)`` when ``content`` is a ``key: value`` line, else None."""
        head = content[0]
        if head in "'\"":
            try:
                key, end = _scan_quoted(content, 0)
            except _Incomplete:
                return None
            except ValueError as exc:
                raise self.err(str(exc), i) from None
            except _Decline as exc:
                raise self.decline(str(exc), i) from None
            after = content[end:].lstrip(" ")
            if not after.startswith(":"):
                return None
            if after[1:2] not in ("", " "):
                raise self.decline("a quoted key followed by ':' and no space", i)
            return key, after[1:].lstrip(" ")
        if head in "?[{&*!|>%@`,]}" or (head in "-:" and content[1:2] in ("", " ")):
            return None
        cut = content.find(" #")
        body = content if cut < 0 else content[:cut]
        idx = body.find(": ")
        if idx < 0:
            if not body.endswith(":"):
                if ":\t" in body:
                    raise self.decline("a tab after a colon", i)
                return None
            idx = len(body) - 1
        key = body[:idx].rstrip(" ")
        if "\t" in key or len(key) > 1000:
            raise self.decline("a key with a tab, or longer than 1000 characters", i)
        if key == "<<":
            raise self.decline("a merge key (<<)", i)
        rest = content[idx + 1 :].lstrip(" ")
        if rest.startswith("\t"):
            raise self.decline("a tab after a colon", i)
        return key, rest

    def block_mapping(self, indent: int, prefix: str) -> dict:
        result: dict = {}
        while True:
            self.skip_blank()
            if self.i >= len(self.lines):
                return result
            ind = self.indent_at(self.i)
            if ind < indent:
                return result
            line = self.lines[self.i]
            if ind > indent:
                raise self.err(f"unexpected indentation: {line.strip()[:40]!r}")
            content = line[ind:]  # trailing spaces kept: they may be inside a quoted scalar
            if content.startswith("- ") or content.rstrip(" ") == "-":
                return result  # a list at this level belongs to the parent key
            key_line = self.i
            kv = self.key_of(content, self.i)
            if kv is None:
                if content[0] in "?[{&*!'\"":
                    raise self.decline(f"a key written {content[:20]!r}")
                raise self.err(
                    f"expected 'key: value', found {content[:60]!r} (is a value missing its key, "
                    "or a continuation line under-indented?)"
                )
            key, rest = kv
            path = f"{prefix}{key}"
            if key in result:
                self.warn("duplicate-key", f"key {key!r} appears twice; the last value wins")
            self.out.lines[path] = self.lineno(key_line)
            self.i += 1
            result[key] = self.value(rest, indent, path, key_line, True)

    def value(self, rest: str, indent: int, path: str, key_line: int, after_key: bool):
        if rest == "" or rest.startswith("#"):
            # a nested block, a list, a scalar on the next line, or null
            self.skip_blank()
            if self.i >= len(self.lines):
                return None
            nind = self.indent_at(self.i)
            content = self.lines[self.i][nind:]
            if content.startswith("- ") or content.rstrip(" ") == "-":
                if nind > indent or (after_key and nind == indent):
                    return self.block_list(nind, path)
                return None
            if nind <= indent:
                return None
            if self.key_of(content, self.i) is not None:
                return self.block_mapping(nind, path + ".")
            self.i += 1
            return self.inline(content, indent, path, self.i - 1)
        return self.inline(rest, indent, path, key_line)

    def inline(self, rest: str, indent: int, path: str, key_line: int):
        """A value that starts on line ``key_line`` with ``rest``."""
        head = rest[0]
        if head not in "'\"[{":  # (trailing spaces may belong to a quoted scalar: `"\ `)
            rest = rest.rstrip(" ")
        if head in "|>":
            indicator = rest.split(" #", 1)[0].rstrip(" ")
            body = indicator[1:]
            if len(body) <= 2 and all(ch in "-+123456789" for ch in body) and len(set(body)) == len(body):
                if sum(ch in "-+" for ch in body) > 1:
                    raise self.err("two chomping indicators on a block scalar", key_line)
                if any(ch in _DIG for ch in body):
                    raise self.decline("a block scalar with an indentation indicator", key_line)
                return self.block_scalar(head == ">", body, indent)
            # crystal-memory: `match: | tail, |tail` -- text, not a block scalar
            self.warn(
                "lenient-block-indicator",
                f"value of {path!r} starts with {head!r}, which strict YAML reads as a block scalar; "
                "read as text (quote it to be portable)",
                key_line,
            )
            return self.plain(rest, indent, path, key_line, convert=False)
        if head in "'\"":
            return self.quoted(rest, key_line)
        if head in "[{":
            return self.flow(rest, key_line)
        if head in "*&!":
            what = "an alias" if head == "*" else "an anchor" if head == "&" else "a tag"
            if not self.lenient and (head != "*" or rest[1:2].isalnum() or rest[1:2] in ("-", "_")):
                raise self.decline(f"{what} ({head}...)", key_line)
            self.warn(
                "unquoted-special",
                f"value of {path!r} starts with {head!r}, which YAML reads as {what}; read as text. "
                f'Quote it: {path.rsplit(".", 1)[-1]}: "{rest}"',
                key_line,
            )
            return self.plain(rest, indent, path, key_line, convert=False)
        if head in "@`":
            self.warn("reserved-indicator", f"value of {path!r} starts with reserved {head!r}; read as text", key_line)
            return self.plain(rest, indent, path, key_line, convert=False)
        if head in "%,]}" or (head in "-?:" and rest[1:2] in ("", " ")):
            raise self.decline(f"a value starting with {rest[:2]!r}", key_line)
        return self.plain(rest, indent, path, key_line)

    def plain(self, rest: str, indent: int, path: str, key_line: int, convert: bool = True):
        cut = rest.find(" #")
        if "\t" in rest:
            if not self.lenient:
                raise self.decline("a tab inside a plain value", key_line)
            # Hugo's own docs write `weight: 30<TAB>#rem`: a tab before a comment
            tab = rest.find("\t#")
            cut = tab if tab >= 0 and (cut < 0 or tab < cut) else cut
            self.warn(
                "tab-in-value",
                f"value of {path!r} holds a tab, which strict YAML rejects there; read leniently (write spaces, not tabs)",
                key_line,
            )
        first = (rest if cut < 0 else rest[:cut]).rstrip(" \t")
        colon = False
        if ": " in first or first.endswith(":"):
            colon = True
        text = first
        lines = self.lines
        multi = False
        if cut < 0:
            j = self.i
            breaks = 0
            while j < len(lines):
                line = lines[j]
                s = line.strip(" ")
                if not s:
                    breaks += 1
                    j += 1
                    continue
                ind = self.indent_of(line)
                if ind <= indent or s.startswith("#"):
                    break
                if "\t" in s:
                    raise self.decline("a tab inside a plain value", j)
                c = s.find(" #")
                piece = s if c < 0 else s[:c].rstrip(" ")
                if ": " in piece or piece.endswith(":"):
                    colon = True
                text += (" " if breaks == 0 else "\n" * breaks) + piece
                multi = True
                breaks = 0
                j += 1
                self.i = j
                if c >= 0:
                    break
        if colon:
            self.warn(
                "unquoted-colon",
                f"value of {path!r} holds ': ', which strict YAML reads as another key; read as text "
                "(quote it to be portable)",
                key_line,
            )
            return text
        if multi or not convert:
            return text
        try:
            return _resolve(text)
        except _Decline as exc:
            raise self.decline(str(exc), key_line) from None

    def block_list(self, indent: int, path: str) -> list:
        items: list = []
        while True:
            self.skip_blank()
            if self.i >= len(self.lines):
                return items
            ind = self.indent_at(self.i)
            content = self.lines[self.i][ind:]
            if ind != indent or not (content.startswith("- ") or content.rstrip(" ") == "-"):
                if ind > indent:
                    raise self.err(f"unexpected indentation in list: {content[:40]!r}")
                return items
            item_line = self.i
            after = content[1:]
            rest = after.lstrip(" ")
            col = ind + 1 + len(after) - len(rest)
            if rest.startswith("\t"):
                raise self.decline("a tab after '-'")
            item_path = f"{path}[{len(items)}]"
            nested = rest.startswith("- ") or rest == "-"
            if nested or (rest and not rest.startswith("#") and self.key_of(rest, self.i) is not None):
                # `- key: value` / `- - x`: a mapping or list item aligned after the dash
                self.lines[self.i] = " " * col + rest
                if nested:
                    items.append(self.block_list(col, item_path))
                else:
                    items.append(self.block_mapping(col, item_path + "."))
                continue
            self.i += 1
            items.append(self.value(rest, indent, item_path, item_line, False))

    def block_scalar(self, folding: bool, header: str, indent: int) -> str:
        """Lines after ``|``/``>``, ported from PyYAML's scanner (chomping and folding alike)."""
        chomp = "-" if "-" in header else "+" if "+" in header else ""
        lines = self.lines
        n = len(lines)
        j = self.i
        breaks: list[str] = []
        widest = 0
        while j < n and lines[j].strip(" ") == "":
            widest = max(widest, len(lines[j]))
            breaks.append("\n")
            j += 1
        content_ind = self.indent_of(lines[j]) if j < n else 0
        block = max(indent + 1, widest, content_ind if j < n else 0)
        if j < n and widest > content_ind >= indent + 1:
            raise self.decline("a blank line more indented than the block scalar's text", j)
        chunks: list[str] = []
        line_break = ""
        while j < n and self.indent_of(lines[j]) >= block and lines[j].strip(" "):
            chunks.extend(breaks)
            text = lines[j][block:]
            leading_non_space = text[:1] not in (" ", "\t")
            chunks.append(text)
            line_break = "\n"
            j += 1
            breaks = []
            while j < n and lines[j].strip(" ") == "":
                if len(lines[j]) > block:
                    raise self.decline("a blank line more indented than the block scalar's text", j)
                breaks.append("\n")
                j += 1
            if j < n and self.indent_of(lines[j]) >= block and lines[j].strip(" "):
                if folding and leading_non_space and lines[j][block] not in " \t":
                    if not breaks:
                        chunks.append(" ")
                else:
                    chunks.append(line_break)
            else:
                break
        if j < n and lines[j].strip(" ") and lines[j].strip(" \t") == "":
            raise self.decline("a line of tabs after a block scalar", j)
        self.i = j
        if chomp != "-":
            chunks.append(line_break)
        if chomp == "+":
            chunks.extend(breaks)
        return "".join(chunks)

    def more(self, buf: str, batch: int) -> str:
        """``buf`` and the next ``batch`` lines: a value that spans lines is read again with
        twice as many lines each time it is incomplete, not one more, so a 20,000-line flow
        list is read in linear time (one more line a try took 278 s on 60 KB)."""
        stop = min(len(self.lines), self.i + batch)
        buf += "\n" + "\n".join(self.lines[self.i : stop])
        self.i = stop
        return buf

    def closed_at(self, buf: str, end: int, key_line: int) -> str:
        """After a value spanning lines that ended at ``buf[end]``: the lines read past its
        closing line are given back; the rest of the closing line is returned (its tail)."""
        self.i = key_line + 1 + buf.count("\n", 0, end)
        nl = buf.find("\n", end)
        return buf[end:] if nl < 0 else buf[end:nl]

    def quoted(self, rest: str, key_line: int):
        buf = rest
        self.i = key_line + 1
        batch = 1
        while True:
            try:
                val, end = _scan_quoted(buf, 0)
            except _Incomplete:
                if self.i >= len(self.lines):
                    raise self.err(f"unclosed {rest[0]} quote", key_line) from None
                buf = self.more(buf, batch)
                batch *= 2
                continue
            except ValueError as exc:
                raise self.err(str(exc), key_line) from None
            except _Decline as exc:
                raise self.decline(str(exc), key_line) from None
            self.tail(self.closed_at(buf, end, key_line), key_line, "the closing quote")
            return val

    def tail(self, tail: str, key_line: int, what: str) -> None:
        """What follows a quoted or flow value on its line: nothing or a comment."""
        t = tail.lstrip(" ")
        if not t or t.startswith("#"):
            return
        if t.startswith(":") or t.startswith("\t"):
            raise self.decline(f"{t[:20]!r} after {what}", key_line)
        raise self.err(f"text after {what}: {t[:40]!r}", key_line)

    def flow(self, rest: str, key_line: int):
        buf = rest
        self.i = key_line + 1
        close = "]" if rest[0] == "[" else "}"
        batch = 1
        while True:
            try:
                val, end = _flow_node(buf, 0)
            except _Incomplete:
                if self.i >= len(self.lines):
                    raise self.err(f"unclosed {rest[0]!r}: expected {close!r}", key_line) from None
                buf = self.more(buf, batch)
                batch *= 2
                continue
            except ValueError as exc:
                raise self.err(str(exc), key_line) from exc
            except _Decline as exc:
                if not _closes(buf + "\n" + "\n".join(self.lines[self.i :])):
                    raise self.err(f"unclosed {rest[0]!r}: expected {close!r}", key_line) from None
                raise self.decline(str(exc), key_line) from None
            self.tail(self.closed_at(buf, end, key_line), key_line, repr(close))
            return val


def _closes(s: str) -> bool:
    """Whether the flow collection opening ``s`` is ever closed (quotes and comments aside);
    False only when it surely is not (the text ends first). A quote opens a quoted scalar only
    where a token starts (after ``[{,:`` and spaces); inside a plain scalar it is text."""
    depth = 0
    j = 0
    n = len(s)
    prev = ""  # the last character that is not a space or a line break
    while j < n:
        ch = s[j]
        if ch in " \n":
            j += 1
            continue
        if ch in "'\"" and (prev == "" or prev in "[{,:"):
            try:
                j = _scan_quoted(s, j)[1]
            except _Incomplete:
                return False
            except (_Decline, ValueError):
                return True  # cannot tell: decline, the full parser decides
            prev = ch
            continue
        if ch == "#" and (j == 0 or s[j - 1] in " \n" or prev in "[]{},:'\""):
            nl = s.find("\n", j)
            j = n if nl < 0 else nl
            continue
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return True
        prev = ch
        j += 1
    return False


def _lines_of(text: str, first_line: int) -> list[str]:
    """The frontmatter's lines, each ended by a line break (a final one is implied)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            raise NotInSubset(first_line + text[: text.find("\r")].count("\n"), "a carriage return inside a line")
    bad = _bad_char(text)
    if bad is not None:
        line = first_line + text[: text.find(bad)].count("\n")
        raise NotInSubset(line, f"not in the hook's YAML subset: the character {bad!r}")
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n")


def parse_subset(text: str, first_line: int = 2) -> ParsedFrontmatter:
    """The standard-library reading; ``NotInSubset`` where it declines (the hook's reader)."""
    return _Parser(_lines_of(text, first_line), first_line).parse()


def parse_frontmatter(text: str, first_line: int = 2) -> ParsedFrontmatter:
    """Parse frontmatter text (without the ``---`` fences); ``first_line`` is its file line.

    What the subset declines is read by the full parser (``geode.kernel.frontmatter_full``)
    unless ``FULL_PARSER`` is off (the hook), where ``NotInSubset`` is raised. Over
    ``MAX_FRONTMATTER_CHARS`` it is a ``FrontmatterError``: what either reader spends on it is
    bounded whatever the text (PyYAML's pure reader takes seconds a megabyte)."""
    if len(text) > MAX_FRONTMATTER_CHARS:
        raise FrontmatterError(
            first_line,
            f"{len(text):,} characters of frontmatter, over the {MAX_FRONTMATTER_CHARS:,} geode reads; not read",
        )
    try:
        return parse_subset(text, first_line)
    except NotInSubset as exc:
        if not FULL_PARSER:
            raise
        from geode.kernel.frontmatter_full import NotYaml, YamlTooLarge, parse_full  # noqa: PLC0415 - off the hook only

        try:
            data, lines = parse_full(text, first_line, exc.line)
        except YamlTooLarge as bomb:  # never read leniently: the note is skipped and named
            raise FrontmatterError(bomb.line, bomb.message) from None
        except NotYaml as bad:
            # not YAML either (a Cursor glob, a crystal's `match: | tail` beside an `&x`): the
            # lenient reading, every construct strict YAML reads otherwise said by a warning
            try:
                return _Parser(_lines_of(text, first_line), first_line, lenient=True).parse()
            except FrontmatterError:
                raise FrontmatterError(bad.line, bad.message) from None
        out = ParsedFrontmatter(data)
        out.lines = lines
        reason = exc.message.removeprefix("not in the hook's YAML subset: ")
        out.warnings.append(
            (
                exc.line,
                "outside-hook-subset",
                f"read by the full YAML parser ({reason}); the hook's standard-library reader declines "
                "it: a crystal like this is delivered from the index geode builds, but dropped by the hook "
                "whenever the note changes, until a geode command refreshes the index (doctor's hook-reader "
                "check fails). Write it without anchors, aliases, tags or explicit keys.",
            )
        )
        return out
