"""One frontmatter editor: set or remove one key of a note, keep every other byte, prove it.

Why one: four regex editors (the queue's status setter, the Cleaner's ``supersedes`` dropper,
the Gardener's salience and match editors, the Corrector's ``review_due`` line) each knew a
little of the note format and each got some of it wrong; one of them turned ``status: >`` +
``  active`` into ``archived active``. The note format belongs to delivery, so the editor lives
here and reads with the delivery parser (``geode.delivery.frontmatter``, the one the hook, the
CLI and the agents read with), whose line numbers say where each key is.

What an edit does:

- **set** (``set_key``): the key's WHOLE value is replaced: the rest of its line and every line
  that belongs to it (block scalars ``|``/``>``, multi-line flow lists, block lists, continuation
  lines of a plain or quoted scalar, comments among them). A comment after the value on the
  key's own line is kept. A key that is absent is added: at the end of the frontmatter (or right
  after the key named by ``after``); a nested key (``crystal.match``) under its mapping, its
  parent created when absent. A file with no frontmatter gets one. The value is written in the
  form the old one was written in where the new value fits it (a flow list stays a flow list, a
  block list a block list with the same indentation, a quoted string quoted the same way), else
  in the plainest form that reads back as the value (``Quoted`` asks for double quotes).
- **remove** (``remove_key``): the key's line and its value's lines go; an absent key is no edit.
- Every other byte stays: the BOM, the line endings (a CRLF file stays CRLF: a new line takes
  the ending of the line it replaces or follows), the body (even when it is not UTF-8), other
  keys' lines and comments.
- **The proof**: the result is split and parsed again exactly as ``parse_note`` does, and its
  frontmatter must be the old one with that one key changed (values compared with their types:
  ``true`` is not ``1``), and the body must be the same bytes. Otherwise, or when the old
  frontmatter does not parse, is not UTF-8, or is opened and never closed, it raises
  ``FrontmatterEditError`` naming the file and the key, and nothing is written: the caller files
  no proposal from it.

Setting a key to the value it already has returns the bytes unchanged. Keys are given as
mapping paths (``status``, ``crystal.match``); list positions are not addressed.
"""

from __future__ import annotations

import copy
import datetime as _dt
from decimal import Decimal

from geode.delivery.errors import GeodeError, StoreError
from geode.delivery.frontmatter import FrontmatterError, parse_frontmatter

_BOM = b"\xef\xbb\xbf"
_LENIENT = ("lenient-block-indicator", "unquoted-special", "reserved-indicator")
_MISSING = object()


class FrontmatterEditError(StoreError, ValueError):
    """An edit that cannot be made safely; ``path``, ``key``, ``line`` (0: none) say where."""

    def __init__(self, path: str, key: str, message: str, line: int = 0):
        self.path = path
        self.key = key
        self.line = line
        self.message = message
        where = (path or "<note>") + (f":{line}" if line else "")
        super().__init__(f"{where}: frontmatter key {key!r}: {message}")


class Quoted(str):
    """A string to be written double-quoted whatever its content (``match: "| tail, x"``)."""


# -- splitting, as geode.delivery.crystal.split_frontmatter does, on bytes ---------------------------
def _is_fence(line: bytes, marks: tuple[str, ...]) -> bool:
    return line.decode("utf-8", "surrogateescape").rstrip("\r").strip() in marks


class _Split:
    """``bom + head + lines (with ends) + tail``; ``head`` is empty when there is no frontmatter,
    and then ``tail`` is everything after the BOM."""

    __slots__ = ("bom", "head", "lines", "ends", "tail", "has_fm")

    def __init__(self, data: bytes, path: str, key: str):
        self.bom = _BOM if data.startswith(_BOM) else b""
        body = data[len(self.bom):]
        self.lines: list[str] = []
        self.ends: list[str] = []
        nl = body.find(b"\n")
        if not _is_fence(body if nl < 0 else body[:nl], ("---",)):
            self.head, self.tail, self.has_fm = b"", body, False
            return
        self.has_fm = True
        self.head = body[: nl + 1] if nl >= 0 else body
        pos = nl + 1
        while True:
            if nl < 0:
                raise FrontmatterEditError(path, key, "the frontmatter opened on line 1 is never closed", 1)
            nl = body.find(b"\n", pos)
            line = body[pos:] if nl < 0 else body[pos:nl]
            if _is_fence(line, ("---", "...")):
                self.tail = body[pos:]
                return
            if nl < 0:
                raise FrontmatterEditError(path, key, "the frontmatter opened on line 1 is never closed", 1)
            content = line.rstrip(b"\r")
            try:
                self.lines.append(content.decode("utf-8"))
            except UnicodeDecodeError:
                raise FrontmatterEditError(path, key, "the frontmatter is not UTF-8", len(self.lines) + 2) from None
            self.ends.append(line[len(content):].decode("ascii") + "\n")
            pos = nl + 1

    def text(self) -> str:
        return "\n".join(self.lines)

    def join(self, lines: list[str], ends: list[str], nl: bytes) -> bytes:
        fm = "".join(a + b for a, b in zip(lines, ends)).encode("utf-8")
        if self.has_fm:
            return self.bom + self.head + fm + self.tail
        return self.bom + b"---" + nl + fm + b"---" + nl + self.tail


def _parse(split: _Split, path: str, key: str):
    try:
        return parse_frontmatter(split.text(), 2)
    except FrontmatterError as exc:
        raise FrontmatterEditError(path, key, f"the frontmatter does not parse ({exc.message})", exc.line) from None
    except RecursionError:
        raise FrontmatterEditError(path, key, "the frontmatter is nested too deeply", 2) from None


# -- values: comparing, normalising ---------------------------------------------------------------
def _same(a, b) -> bool:
    """Equality that tells ``true`` from ``1`` and ``"1"`` from ``1`` (an int and a float of the
    same number are the same: ``salience: 1`` is ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return _same_mapping(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        return str(a) == str(b)
    return type(a) is type(b) and a == b


def _same_mapping(a: dict, b: dict) -> bool:
    """Same keys with the same values; key ORDER is not compared (an added key goes last)."""
    return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)


def _prepare(value):
    """``value`` as it is written: dates as ``YYYY-MM-DD`` text, tuples as lists, ``Quoted`` kept."""
    if isinstance(value, Quoted):
        return value
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_prepare(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _prepare(v) for k, v in value.items()}
    return value


def _normal(value):
    """What the parser gives back for ``value``: dates as ``YYYY-MM-DD`` text, tuples as lists."""
    if isinstance(value, Quoted):
        return str(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _normal(v) for k, v in value.items()}
    return value


def _get(data, parts: list[str]):
    cur = data
    for p in parts:
        if not isinstance(cur, dict) or p not in cur:
            return _MISSING
        cur = cur[p]
    return cur


# -- reading one key's lines ----------------------------------------------------------------------
def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _key_split(line: str) -> tuple[str, str]:
    """``(indentation + key + ':', the rest of the line)`` of a ``key: value`` line."""
    ind = _indent(line)
    content = line[ind:]
    if content[:1] in ("'", '"'):
        colon = content.find(content[0], 1) + 1
    else:
        idx = content.find(": ")
        colon = idx if idx >= 0 else len(content.rstrip()) - 1
    return line[: ind + colon + 1], line[ind + colon + 1:]


def _extent(lines: list[str], k: int) -> int:
    """Index after the last line that belongs to the value of the key on line ``k``: deeper
    lines, and ``- `` items at the key's own indentation under a key with no inline value.
    Blank and comment lines count only between lines that belong."""
    ind = _indent(lines[k])
    rest = _key_split(lines[k])[1].strip()
    items_here = rest == "" or rest.startswith("#")
    end = k + 1
    j = k + 1
    while j < len(lines):
        s = lines[j].strip()
        if not s or s.startswith("#"):
            j += 1
            continue
        li = _indent(lines[j])
        if li > ind or (items_here and li == ind and (s.startswith("- ") or s == "-")):
            end = j = j + 1
            continue
        break
    return end


def _quoted_end(s: str) -> int:
    q = s[0]
    j = 1
    while j < len(s):
        if q == "'" and s[j] == "'":
            if s[j + 1: j + 2] == "'":
                j += 2
                continue
            return j + 1
        if q == '"' and s[j] == "\\":
            j += 2
            continue
        if q == '"' and s[j] == '"':
            return j + 1
        j += 1
    return -1


def _flow_end(s: str) -> int:
    depth = 0
    j = 0
    while j < len(s):
        ch = s[j]
        if ch in "'\"":
            e = _quoted_end(s[j:])
            if e < 0:
                return -1
            j += e
            continue
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


def _comment(rest: str) -> str:
    """The comment after a value on the key's line, with the spaces before it ('' when none)."""
    s = rest.lstrip(" ")
    if not s:
        return ""
    if s.startswith("#"):
        return rest  # no inline value: the line ends in a comment
    if s[0] in "'\"":
        end = _quoted_end(s)
    elif s[0] in "[{":
        end = _flow_end(s)
    else:
        indicator = s.split(" #", 1)[0].strip()
        if s[0] in "|>" and len(indicator) <= 3 and all(ch in "|>-+0123456789" for ch in indicator):
            end = len(indicator)
        else:
            idx = s.find(" #")
            end = len(s[:idx].rstrip()) if idx >= 0 else -1
    if end < 0:
        return ""
    tail = s[end:]
    return tail if tail.lstrip(" ").startswith("#") else ""


class _Form:
    """How the old value was written: ``kind`` plain | lenient | single | double | flow | flowmap |
    block-scalar | block-list | block-map | empty | none; ``indent`` of block items or keys."""

    __slots__ = ("kind", "indent")

    def __init__(self, kind: str = "none", indent: int = 0):
        self.kind = kind
        self.indent = indent


def _form(lines: list[str], k: int, end: int, lenient: bool) -> _Form:
    s = _key_split(lines[k])[1].strip()
    if s == "" or s.startswith("#"):
        for j in range(k + 1, end):
            t = lines[j].strip()
            if not t or t.startswith("#"):
                continue
            return _Form("block-list" if t.startswith("- ") or t == "-" else "block-map", _indent(lines[j]))
        return _Form("empty")
    if lenient:
        return _Form("lenient")
    return _Form({"'": "single", '"': "double", "[": "flow", "{": "flowmap", "|": "block-scalar",
                  ">": "block-scalar"}.get(s[0], "plain"))


# -- writing values -------------------------------------------------------------------------------
class _Unwritable(GeodeError):
    pass


def _reads(text: str, value, flow: bool, lenient: bool) -> bool:
    """Whether ``text`` (a scalar as written) reads back as ``value`` with this parser."""
    try:
        parsed = parse_frontmatter(f"k: [{text}]" if flow else f"k: {text}", 2)
    except FrontmatterError:
        return False
    got = parsed.data.get("k", _MISSING)
    if flow:
        got = got[0] if isinstance(got, list) and len(got) == 1 else _MISSING
    return _same(got, value) and (lenient or not parsed.warnings)


#: never written plain: line breaks of YAML 1.1 and control characters (portable readers choke)
_NOT_PLAIN = frozenset([chr(c) for c in range(32)] + ["\x7f", "\x85", "\u2028", "\u2029", "\ufeff"])


def _plain_candidate(s: str, flow: bool, lenient: bool = False) -> bool:
    """Whether ``s`` may be tried plain: what portable YAML reads as plain text too (a leading
    indicator such as ``|`` or ``*`` only where the old value was written so: ``lenient``)."""
    if not s or s != s.strip() or any(ch in _NOT_PLAIN for ch in s) or s[0] in "#'\"[{" or " #" in s:
        return False
    if s[0] in "|>*&!%@`" and not (lenient and not flow):
        return False
    if ": " in s or s.endswith(":") or s.startswith(("- ", "? ")) or s in ("-", "?"):
        return False
    return not (flow and any(ch in s for ch in ",[]{}"))


def _double(s: str) -> str:
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif ord(ch) < 32 or ord(ch) == 127:
            raise _Unwritable(f"the value holds control character {ch!r}, which this format cannot write")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _scalar(value, kind: str, flow: bool) -> str:
    if value is None:
        return "null" if flow else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Unwritable(f"{value!r} cannot be written as a number this format reads")
        text = repr(value)
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")
            if "." not in text:
                text += ".0"
        if not _reads(text, value, flow, False):
            raise _Unwritable(f"{value!r} does not read back as written")
        return text
    if not isinstance(value, str):
        raise _Unwritable(f"a {type(value).__name__} is not a frontmatter value")
    if not isinstance(value, Quoted):
        if kind == "single" and "\n" not in value:
            text = "'" + value.replace("'", "''") + "'"
            if _reads(text, value, flow, False):
                return text
        lenient = kind == "lenient"
        if kind != "double" and _plain_candidate(value, flow, lenient) and _reads(value, value, flow, lenient):
            return value
    text = _double(value)
    if not _reads(text, str(value), flow, False):
        raise _Unwritable(f"{value!r} does not read back as written")
    return text


def _key_text(key: str) -> str:
    return key if _plain_candidate(key, True) and ":" not in key and key.strip() == key else _double(key)


def _flow(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key_text(str(k))}: {_flow(v)}" for k, v in value.items()) + "}"
    return _scalar(value, "none", True)


def _render(value, form: _Form, indent: int) -> tuple[str, list[str]]:
    """``(inline text after 'key: ', block lines)`` for a key at ``indent``."""
    if isinstance(value, (list, tuple)):
        if form.kind == "block-list" and value:  # (an item with no text would open a nested block)
            return "", [" " * form.indent + "- " + (_flow(v) if v is None or isinstance(v, (list, tuple, dict))
                                                     else _scalar(v, "none", False)) for v in value]
        return _flow(value), []
    if isinstance(value, dict):
        if not value:
            return "{}", []
        if form.kind == "flowmap":
            return _flow(value), []
        child = form.indent if form.kind == "block-map" else indent + 2
        out = []
        for k, v in value.items():
            inline, block = _render(v, _Form(), child)
            out.append(" " * child + _key_text(str(k)) + ":" + (" " + inline if inline else ""))
            out.extend(block)
        return "", out
    return _scalar(value, form.kind, False), []


# -- the editor -----------------------------------------------------------------------------------
class _Doc:
    def __init__(self, data: bytes, path: str, key: str):
        self.data = data
        self.path = path
        self.key = key
        self.split = _Split(data, path, key)
        self.parsed = _parse(self.split, path, key) if self.split.has_fm else None
        self.fm = self.parsed.data if self.parsed is not None else {}
        if not isinstance(self.fm, dict):
            raise FrontmatterEditError(path, key, "the frontmatter is not a mapping", 2)

    def fail(self, message: str, line: int = 0):
        return FrontmatterEditError(self.path, self.key, message, line)

    def nl(self) -> str:
        if self.split.has_fm:
            head = self.split.head
            return "\r\n" if head.endswith(b"\r\n") else "\n"
        return "\r\n" if b"\r\n" in self.split.tail[:4096] else "\n"

    def index(self, parts: list[str]) -> int:
        line = self.parsed.lines.get(".".join(parts)) if self.parsed is not None else None
        if line is None:
            raise self.fail("its line cannot be found")
        return line - 2

    def lenient(self, k: int) -> bool:
        return any(ln == k + 2 and code in _LENIENT for ln, code, _m in self.parsed.warnings)

    # -- set ------------------------------------------------------------------------------------
    def set(self, value, after: str | None) -> bytes:
        parts = self.key.split(".")
        if not all(parts):
            raise self.fail("not a key path (an empty part)")
        value = _prepare(value)
        want = _normal(value)
        old = _get(self.fm, parts)
        if old is not _MISSING and _same(old, want):
            return self.data
        # the deepest part that exists
        m = 0
        cur = self.fm
        while m < len(parts) - 1 and isinstance(cur, dict) and parts[m] in cur and isinstance(cur[parts[m]], dict):
            cur = cur[parts[m]]
            m += 1
        if parts[m] in cur:
            if m < len(parts) - 1:  # an existing parent that is not a mapping
                if cur[parts[m]] is not None:
                    raise self.fail(f"{'.'.join(parts[: m + 1])} is a {type(cur[parts[m]]).__name__}, not a mapping")
                value = _nest(parts[m + 1:], value)
            return self.replace(parts[: m + 1], value, want)
        return self.insert(parts[:m], parts[m], _nest(parts[m + 1:], value), want, after)

    def replace(self, parts: list[str], value, want) -> bytes:
        sp = self.split
        k = self.index(parts)
        end = _extent(sp.lines, k)
        head, rest = _key_split(sp.lines[k])
        form = _form(sp.lines, k, end, self.lenient(k))
        inline, block = self._render(value, form, _indent(sp.lines[k]), k)
        comment = _comment(rest)
        first = head + (" " + inline if inline else "") + comment
        ending = sp.ends[k]
        lines = sp.lines[:k] + [first] + block + sp.lines[end:]
        ends = sp.ends[:k] + [ending] * (1 + len(block)) + sp.ends[end:]
        return self.check(lines, ends, want)

    def insert(self, parent: list[str], name: str, value, want, after: str | None) -> bytes:
        sp = self.split
        if parent:
            pk = self.index(parent)
            pend = _extent(sp.lines, pk)
            pform = _form(sp.lines, pk, pend, False)
            if pform.kind != "block-map":  # a flow mapping (or an empty one): written again whole
                merged = dict(_get(self.fm, parent))
                merged[name] = value
                return self.replace(parent, merged, want)
            indent, at = pform.indent, pend
        else:
            indent = min((_indent(ln) for ln in sp.lines if ln.strip() and not ln.strip().startswith("#")),
                         default=0)
            at = len(sp.lines)
        if after is not None:
            sibling = [*parent, after]
            if _get(self.fm, sibling) is not _MISSING:
                at = _extent(sp.lines, self.index(sibling))
        inline, block = self._render(value, _Form(), indent, None)
        new = [" " * indent + _key_text(name) + ":" + (" " + inline if inline else "")] + block
        ending = sp.ends[at - 1] if at > 0 else self.nl()
        lines = sp.lines[:at] + new + sp.lines[at:]
        ends = sp.ends[:at] + [ending] * len(new) + sp.ends[at:]
        return self.check(lines, ends, want)

    def _render(self, value, form: _Form, indent: int, k: int | None):
        try:
            return _render(value, form, indent)
        except _Unwritable as exc:
            raise self.fail(str(exc), k + 2 if k is not None else 0) from None

    # -- remove ---------------------------------------------------------------------------------
    def remove(self) -> bytes:
        parts = self.key.split(".")
        if _get(self.fm, parts) is _MISSING:
            return self.data
        parent = _get(self.fm, parts[:-1]) if len(parts) > 1 else self.fm
        if len(parts) > 1 and len(parent) == 1:  # its mapping would be left empty: it becomes {}
            return self.replace(parts[:-1], {}, _MISSING)
        sp = self.split
        k = self.index(parts)
        end = _extent(sp.lines, k)
        return self.check(sp.lines[:k] + sp.lines[end:], sp.ends[:k] + sp.ends[end:], _MISSING)

    # -- the proof ------------------------------------------------------------------------------
    def check(self, lines: list[str], ends: list[str], want) -> bytes:
        out = self.split.join(lines, ends, self.nl().encode())
        parts = self.key.split(".")
        expected = copy.deepcopy(self.fm)
        if want is _MISSING:
            node = expected
            for p in parts[:-1]:
                node = node[p]
            node.pop(parts[-1], None)
            if len(parts) > 1 and not node:
                pass  # written as {} by remove()
        else:
            node = expected
            for p in parts[:-1]:
                if not isinstance(node.get(p), dict):
                    node[p] = {}
                node = node[p]
            node[parts[-1]] = want
        try:
            again = _Split(out, self.path, self.key)
            parsed = _parse(again, self.path, self.key)
        except FrontmatterEditError as exc:
            raise self.fail(f"the edit would break the note ({exc.message})", exc.line) from None
        body = self.split.tail if self.split.has_fm else b"---" + self.nl().encode() + self.split.tail
        if again.tail != body:
            raise self.fail("the edit would change the body")
        if not _same_mapping(parsed.data, expected):
            changed = sorted(k for k in set(expected) | set(parsed.data)
                             if not _same(expected.get(k, _MISSING), parsed.data.get(k, _MISSING)))
            raise self.fail("the edit would not read back as meant; it would change "
                            + ", ".join(changed or [self.key]))
        return out


def _nest(parts: list[str], value):
    for p in reversed(parts):
        value = {p: value}
    return value


def set_key(data: bytes, key: str, value, *, path: str = "", after: str | None = None) -> bytes:
    """``data`` (a note's bytes) with frontmatter ``key`` (``status``, ``crystal.match``) set to
    ``value`` (str, int, float, bool, None, date, list, dict; ``Quoted`` for double quotes).
    ``after``: when the key is added, put it right after this sibling key (when present).
    Raises ``FrontmatterEditError`` (naming ``path`` and ``key``) when it cannot be done safely."""
    return _Doc(data, path, key).set(value, after)


def remove_key(data: bytes, key: str, *, path: str = "") -> bytes:
    """``data`` without frontmatter ``key`` and its value's lines; unchanged when it is absent.
    Removing the last key of a nested mapping leaves the mapping as ``{}``."""
    return _Doc(data, path, key).remove()


def value_form(data: bytes, key: str, *, path: str = "") -> str:
    """How ``key``'s value is written: ``plain``, ``lenient`` (plain text the parser reads
    leniently, e.g. ``match: | tail``), ``single``, ``double``, ``flow``, ``flowmap``,
    ``block-scalar``, ``block-list``, ``block-map``, ``empty``; ``absent`` when there is none."""
    doc = _Doc(data, path, key)
    parts = key.split(".")
    if _get(doc.fm, parts) is _MISSING:
        return "absent"
    k = doc.index(parts)
    return _form(doc.split.lines, k, _extent(doc.split.lines, k), doc.lenient(k)).kind
