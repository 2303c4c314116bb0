"""Checks a parsed ``geode.toml`` against ``config.SCHEMA`` and finds the line of a key.

Loaded only when ``geode.toml`` is parsed (a cache miss) or an error is reported, so a hook call
that hits the settings cache never pays for it. Standard library only: the hook writes the cache.
It imports nothing of geode (``config`` imports it lazily; an import back would be a cycle): the
schema comes in as an argument, its kinds are the strings ``config`` names (``"int"``, ...), and an
unknown kind is an error, never a pass.

Why a hand-made locator: ``tomllib`` gives no line numbers for the keys it parsed. ``key_lines``
scans the text once, as TOML lays it out (``[table]`` and ``[[array]]`` headers, dotted and quoted
keys, inline tables, multi-line strings and arrays, comments), and records the line that
defines each key path. It runs only on text ``tomllib`` has accepted, and only to word a message.
``tests/test_settings.py`` checks it against ``tomllib`` itself on generated documents.
"""

from __future__ import annotations

#: the kinds of ``config.SCHEMA`` (``config.INT`` ... ``config.STRS``)
INT, FLOAT, STR, BOOL, DATE, STRS = "int", "float", "str", "bool", "date", "strs"

#: for the checker only: ``typing`` costs the hook milliseconds at import, and annotations here
#: are strings (``from __future__ import annotations``), so nothing imports it at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    #: a kind of ``config.SCHEMA``: one of the strings above, or ``("map", kind)``
    Kind = str | tuple[str, "Kind"]

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


# -- checking ------------------------------------------------------------------------------
def _expected(kind: Kind) -> str:
    if isinstance(kind, tuple):
        return "a table"
    return {
        INT: "an integer",
        FLOAT: "a number",
        STR: "a string",
        BOOL: "true or false",
        DATE: "a date (2027-02-27)",
        STRS: "a string or an array of strings",
    }[kind]


def _matches(kind: Kind, value: object) -> bool:
    if isinstance(kind, tuple):  # MAP(of)
        return isinstance(value, dict)
    if kind == INT:
        return type(value) is int
    if kind == FLOAT:
        return type(value) in (int, float)
    if kind == STR:
        return isinstance(value, str)
    if kind == BOOL:
        return type(value) is bool
    if kind == DATE:  # a date or a string; a date-time is not a date
        import datetime

        return isinstance(value, str) or type(value) is datetime.date
    if kind == STRS:
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    raise ValueError(f"unknown kind {kind!r}")


def _show_value(value: object) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        return f"{value} (an integer)"
    if isinstance(value, float):
        return f"{value!r} (a float)"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '" (a string)'
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"{value} (a {type(value).__name__})"


def _show_key(key: str) -> str:
    if key and all(ch in _BARE for ch in key):
        return key
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def label(keypath: tuple) -> str:
    """``[cleaner] cap``, ``[cleaner.caps] "a/b"``, ``[cleaner]`` (a table alone)."""
    if len(keypath) == 1:
        return f"[{_show_key(keypath[0])}]"
    return "[" + ".".join(_show_key(k) for k in keypath[:-1]) + "] " + _show_key(keypath[-1])


def _hint(word: str, choices: Iterable[str], fmt: str = "{}") -> str:
    import difflib  # on the error path only

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {fmt.format(close[0])}?)" if close else ""


def _elsewhere(schema: dict, key: str, table: str | None) -> str:
    homes = [t for t, keys in schema.items() if isinstance(keys, dict) and key in keys and t != table]
    return f" ({key} is a key of {', '.join(f'[{t}]' for t in homes)})" if homes else ""


def _check_value(kind: Kind, value: object, keypath: tuple, problems: list) -> None:
    if not _matches(kind, value):
        problems.append((keypath, f"{label(keypath)}: expected {_expected(kind)}, got {_show_value(value)}"))
        return
    if isinstance(kind, tuple) and isinstance(value, dict):  # the user's own names: each value of kind[1]
        for k, v in value.items():
            _check_value(kind[1], v, keypath + (k,), problems)


def problems_in(data: dict, schema: dict) -> list[tuple[tuple, str]]:
    """``[(keypath, message)]`` for every unknown table or key and every value of the wrong type."""
    problems: list[tuple[tuple, str]] = []
    for table, value in data.items():
        spec = schema.get(table)
        if spec is None:
            if isinstance(value, dict):
                problems.append(
                    (
                        (table,),
                        f"[{_show_key(table)}]: unknown table"
                        + (_hint(table, schema, "[{}]") or f"; the tables are {', '.join(schema)}"),
                    )
                )
            else:
                problems.append(
                    (
                        (table,),
                        f"{_show_key(table)}: a key outside any table"
                        + (_elsewhere(schema, table, None) or _hint(table, schema, "[{}]")),
                    )
                )
            continue
        if isinstance(spec, tuple):
            _check_value(spec, value, (table,), problems)
            continue
        if not isinstance(value, dict):
            problems.append(((table,), f"[{table}]: expected a table, got {_show_value(value)}"))
            continue
        for key, v in value.items():
            if key not in spec:
                problems.append(
                    (
                        (table, key),
                        f"{label((table, key))}: unknown key" + (_hint(key, spec) or _elsewhere(schema, key, table)),
                    )
                )
                continue
            _check_value(spec[key][0], v, (table, key), problems)
    return problems


def describe(problems: list[tuple[tuple, str]], text: str, path: str) -> str:
    """One line per problem, ``path:line: message``, in the order of the file."""
    try:
        entries = key_lines(text)
    except (ValueError, IndexError, KeyError):  # the messages still name file and key
        entries = []
    found = [(_line_of(entries, kp), msg) for kp, msg in problems]
    found.sort(key=lambda lm: (lm[0] is None, lm[0] or 0))
    return "\n".join(f"{path}:{line}: {msg}" if line else f"{path}: {msg}" for line, msg in found)


# -- locating ------------------------------------------------------------------------------
# -- the typed tables ----------------------------------------------------------------------
def annotation_of(kind: Kind, dflt: object) -> str:
    """The annotation a ``config.Table`` field of ``kind`` carries (``| None`` when the default is None).

    A TOML date arrives as a string (``load_settings`` keeps dates as text); ``strs`` as a tuple."""
    if isinstance(kind, tuple):  # MAP(of)
        text = f"dict[str, {annotation_of(kind[1], '')}]"
    else:
        text = {INT: "int", FLOAT: "float", STR: "str", BOOL: "bool", DATE: "str", STRS: "tuple[str, ...]"}[kind]
    return f"{text} | None" if dflt is None else text


def table_mismatches(cls: Any, spec: dict) -> list[str]:  # cls: a config.Table (not imported: no cycle)
    """How a ``config.Table`` class disagrees with its ``SCHEMA`` table ``spec``: a key without a
    field (or a field without a key), fields out of ``SCHEMA``'s order, or a field whose annotation
    is not the one its kind means. Empty when they agree: ``SCHEMA`` stays the one declaration."""
    out = []
    slots = tuple(cls.__dict__.get("__slots__", ()))
    notes = cls.__dict__.get("__annotations__", {})
    for key in spec:
        if key not in slots:
            out.append(f"[{cls.TABLE}] {key}: in SCHEMA, no field of {cls.__name__}")
    for key in slots:
        if key not in spec:
            out.append(f"[{cls.TABLE}] {key}: a field of {cls.__name__}, not in SCHEMA")
    if not out and slots != tuple(spec):
        out.append(f"{cls.__name__}: fields not in SCHEMA's order")
    for key, (kind, dflt, _var) in spec.items():
        want = annotation_of(kind, dflt)
        if key in slots and notes.get(key) != want:
            out.append(f"[{cls.TABLE}] {key}: {cls.__name__} says {notes.get(key)!r}, SCHEMA's kind means {want!r}")
    return out


def locate(text: str, keypath: tuple) -> int | None:
    """The 1-based line that defines ``keypath`` in ``text`` (a valid TOML document), or None.

    A table made only implicitly (by ``[a.b]`` or ``a.b = 1``) is found where it is first made;
    a key inside a value (an array) is found on the line of that value.
    """
    return _line_of(key_lines(text), tuple(keypath))


def _line_of(entries: list[tuple[tuple, int]], keypath: tuple) -> int | None:
    n = len(keypath)
    hits = [line for path, line in entries if path[:n] == keypath]
    if hits:
        return min(hits)
    best = None
    for path, line in entries:  # the deepest value that holds it
        if keypath[: len(path)] == path and (best is None or len(path) > best[0]):
            best = (len(path), line)
    return best[1] if best else None


def key_lines(text: str) -> list[tuple[tuple, int]]:
    """``[(key path, line)]`` for each table header, key and inline-table key, in order."""
    return _Scan(text).run()


class _Scan:
    def __init__(self, text: str):
        self.t = text
        self.n = len(text)
        self.i = 0
        self.line = 1
        self.out: list[tuple[tuple, int]] = []

    # -- characters ------------------------------------------------------------------------
    def _peek(self, s: str) -> bool:
        return self.t.startswith(s, self.i)

    def _step(self) -> None:
        if self.t[self.i] == "\n":
            self.line += 1
        self.i += 1

    def _blank(self, newlines: bool) -> None:
        """Skip spaces and tabs (and, with ``newlines``, line ends and comments)."""
        t = self.t
        while self.i < self.n:
            ch = t[self.i]
            if ch in " \t" or (newlines and ch in "\r\n"):
                self._step()
            elif newlines and ch == "#":
                self._comment()
            else:
                return

    def _comment(self) -> None:
        end = self.t.find("\n", self.i)
        self.i = self.n if end < 0 else end

    # -- keys ------------------------------------------------------------------------------
    def _key(self) -> tuple:
        parts = []
        while True:
            self._blank(False)
            if self.i >= self.n:
                break
            ch = self.t[self.i]
            if ch == '"':
                parts.append(self._basic())
            elif ch == "'":
                parts.append(self._literal())
            else:
                start = self.i
                while self.i < self.n and self.t[self.i] in _BARE:
                    self.i += 1
                if self.i == start:
                    raise ValueError(f"no key at line {self.line}")
                parts.append(self.t[start : self.i])
            self._blank(False)
            if self.i < self.n and self.t[self.i] == ".":
                self.i += 1
                continue
            break
        return tuple(parts)

    def _basic(self) -> str:
        """A one-line ``"..."`` string, unescaped (keys are compared with tomllib's)."""
        t = self.t
        out: list[str] = []
        self.i += 1
        while self.i < self.n:
            ch = t[self.i]
            if ch == '"':
                self.i += 1
                return "".join(out)
            if ch == "\\":
                esc = t[self.i + 1 : self.i + 2]
                if esc in ("u", "U"):
                    width = 4 if esc == "u" else 8
                    out.append(chr(int(t[self.i + 2 : self.i + 2 + width], 16)))
                    self.i += 2 + width
                    continue
                out.append(_ESCAPES.get(esc, esc))
                self.i += 2
                continue
            out.append(ch)
            self.i += 1
        raise ValueError("unterminated string")

    def _literal(self) -> str:
        end = self.t.find("'", self.i + 1)
        if end < 0:
            raise ValueError("unterminated string")
        s = self.t[self.i + 1 : end]
        self.i = end + 1
        return s

    # -- values ----------------------------------------------------------------------------
    def _multiline(self, quote: str) -> None:
        """Skip a ``\"\"\"`` or ``'''`` string (up to two quotes may close it early)."""
        delim = quote * 3
        self.i += 3
        while self.i < self.n:
            if quote == '"' and self.t[self.i] == "\\":
                self._step()
                if self.i < self.n:
                    self._step()
                continue
            if self._peek(delim):
                self.i += 3
                extra = 0
                while extra < 2 and self.i < self.n and self.t[self.i] == quote:
                    self.i += 1
                    extra += 1
                return
            self._step()
        raise ValueError("unterminated multi-line string")

    def _value(self, path: tuple | None) -> None:
        """Skip one value; record the keys of an inline table under ``path`` (None inside arrays)."""
        self._blank(False)
        if self.i >= self.n:
            return
        ch = self.t[self.i]
        if self._peek('"""') or self._peek("'''"):
            self._multiline(ch)
        elif ch == '"':
            self._basic()
        elif ch == "'":
            self._literal()
        elif ch == "[":
            self.i += 1
            while True:
                self._blank(True)
                if self.i >= self.n:
                    raise ValueError("unterminated array")
                if self.t[self.i] == "]":
                    self.i += 1
                    return
                before = self.i
                self._value(None)
                self._blank(True)
                if self.i < self.n and self.t[self.i] == ",":
                    self.i += 1
                elif self.i == before:
                    raise ValueError(f"cannot read an array at line {self.line}")
        elif ch == "{":
            self.i += 1
            while True:
                self._blank(True)
                if self.i >= self.n:
                    raise ValueError("unterminated inline table")
                if self.t[self.i] == "}":
                    self.i += 1
                    return
                line = self.line
                key = self._key()
                self._blank(False)
                if not self._peek("="):
                    raise ValueError(f"no '=' at line {self.line}")
                self.i += 1
                if path is not None:
                    self.out.append((path + key, line))
                self._value(None if path is None else path + key)
                self._blank(True)
                if self.i < self.n and self.t[self.i] == ",":
                    self.i += 1
        else:  # a number, boolean, date or time: up to the next delimiter
            while self.i < self.n and self.t[self.i] not in ",]}\r\n#":
                self.i += 1

    # -- the document ------------------------------------------------------------------------
    def run(self) -> list[tuple[tuple, int]]:
        table: tuple = ()
        while True:
            self._blank(True)
            if self.i >= self.n:
                return self.out
            before = self.i
            line = self.line
            if self.t[self.i] == "[":
                double = self._peek("[[")
                self.i += 2 if double else 1
                table = self._key()
                self._blank(False)
                self.i += 2 if double else 1
                self.out.append((table, line))
            else:
                key = self._key()
                self._blank(False)
                if not self._peek("="):
                    raise ValueError(f"no '=' at line {self.line}")
                self.i += 1
                self.out.append((table + key, line))
                self._value(table + key)
            self._blank(False)
            if self.i < self.n and self.t[self.i] == "#":
                self._comment()
            if self.i == before:
                raise ValueError(f"cannot read line {self.line}")
