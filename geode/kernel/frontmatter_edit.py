"""One frontmatter editor: set or remove one key of a note, keep every other byte, prove it.

Why one: four regex editors (the queue's status setter, the Cleaner's ``supersedes`` dropper,
the Gardener's salience and match editors, the Corrector's ``review_due`` line) each knew a
little of the note format and each got some of it wrong; one of them turned ``status: >`` +
``  active`` into ``archived active``. The note format belongs to delivery, so the editor lives
here and reads with the delivery parser (``geode.kernel.frontmatter``, the one the hook, the
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

Where a key's value lies and how it was written is read by ``geode.kernel.frontmatter_lines``;
values are compared and written by ``geode.kernel.frontmatter_values``.
"""

from __future__ import annotations

import copy

from geode.kernel.errors import StoreError
from geode.kernel.frontmatter import FrontmatterError, parse_frontmatter
from geode.kernel.frontmatter_lines import Form, extent, form_of, indent_of, key_split, trailing_comment
from geode.kernel.frontmatter_values import (
    MISSING,
    Unwritable,
    get_path,
    key_text,
    normal,
    prepare,
    render,
    same,
    same_mapping,
)

_BOM = b"\xef\xbb\xbf"
_LENIENT = ("lenient-block-indicator", "unquoted-special", "reserved-indicator")


class FrontmatterEditError(StoreError, ValueError):
    """An edit that cannot be made safely; ``path``, ``key``, ``line`` (0: none) say where."""

    def __init__(self, path: str, key: str, message: str, line: int = 0):
        self.path = path
        self.key = key
        self.line = line
        self.message = message
        where = (path or "<note>") + (f":{line}" if line else "")
        super().__init__(f"{where}: frontmatter key {key!r}: {message}")


# -- splitting, as geode.kernel.crystal.split_frontmatter does, on bytes ---------------------------
def _is_fence(line: bytes, marks: tuple[str, ...]) -> bool:
    return line.decode("utf-8", "surrogateescape").rstrip("\r").strip() in marks


class _Split:
    """``bom + head + lines (with ends) + tail``; ``head`` is empty when there is no frontmatter,
    and then ``tail`` is everything after the BOM."""

    __slots__ = ("bom", "head", "lines", "ends", "tail", "has_fm")

    def __init__(self, data: bytes, path: str, key: str):
        self.bom = _BOM if data.startswith(_BOM) else b""
        body = data[len(self.bom) :]
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
            if b"\r" in content:
                # LF CR ("\n\r") or a CR alone: YAML (and the readers) break the line there,
                # the byte editor does not, so every key's line would be off: refused, never guessed
                raise FrontmatterEditError(
                    path,
                    key,
                    "a carriage return that does not end a line (LF CR or CR line endings); "
                    "not edited: save the file with LF or CRLF line endings",
                    len(self.lines) + 2,
                )
            try:
                self.lines.append(content.decode("utf-8"))
            except UnicodeDecodeError:
                raise FrontmatterEditError(path, key, "the frontmatter is not UTF-8", len(self.lines) + 2) from None
            self.ends.append(line[len(content) :].decode("ascii") + "\n")
            pos = nl + 1

    def text(self) -> str:
        return "\n".join(self.lines)

    def join(self, lines: list[str], ends: list[str], nl: bytes) -> bytes:
        fm = "".join(a + b for a, b in zip(lines, ends, strict=False)).encode("utf-8")
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
        return self.parsed is not None and any(
            ln == k + 2 and code in _LENIENT for ln, code, _m in self.parsed.warnings
        )

    # -- set ------------------------------------------------------------------------------------
    def set(self, value, after: str | None) -> bytes:
        parts = self.key.split(".")
        if not all(parts):
            raise self.fail("not a key path (an empty part)")
        value = prepare(value)
        want = normal(value)
        old = get_path(self.fm, parts)
        if old is not MISSING and same(old, want):
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
                value = _nest(parts[m + 1 :], value)
            return self.replace(parts[: m + 1], value, want)
        return self.insert(parts[:m], parts[m], _nest(parts[m + 1 :], value), want, after)

    def replace(self, parts: list[str], value, want) -> bytes:
        sp = self.split
        k = self.index(parts)
        end = extent(sp.lines, k)
        head, rest = key_split(sp.lines[k])
        form = form_of(sp.lines, k, end, self.lenient(k))
        inline, block = self._render(value, form, indent_of(sp.lines[k]), k)
        comment = trailing_comment(rest)
        first = head + (" " + inline if inline else "") + comment
        ending = sp.ends[k]
        lines = sp.lines[:k] + [first] + block + sp.lines[end:]
        ends = sp.ends[:k] + [ending] * (1 + len(block)) + sp.ends[end:]
        return self.check(lines, ends, want)

    def insert(self, parent: list[str], name: str, value, want, after: str | None) -> bytes:
        sp = self.split
        if parent:
            pk = self.index(parent)
            pend = extent(sp.lines, pk)
            pform = form_of(sp.lines, pk, pend, False)
            if pform.kind != "block-map":  # a flow mapping (or an empty one): written again whole
                merged = dict(get_path(self.fm, parent))
                merged[name] = value
                return self.replace(parent, merged, want)
            indent, at = pform.indent, pend
        else:
            indent = min((indent_of(ln) for ln in sp.lines if ln.strip() and not ln.strip().startswith("#")), default=0)
            at = len(sp.lines)
        if after is not None:
            sibling = [*parent, after]
            if get_path(self.fm, sibling) is not MISSING:
                at = extent(sp.lines, self.index(sibling))
        inline, block = self._render(value, Form(), indent, None)
        new = [" " * indent + key_text(name) + ":" + (" " + inline if inline else "")] + block
        ending = sp.ends[at - 1] if at > 0 else self.nl()
        lines = sp.lines[:at] + new + sp.lines[at:]
        ends = sp.ends[:at] + [ending] * len(new) + sp.ends[at:]
        return self.check(lines, ends, want)

    def _render(self, value, form: Form, indent: int, k: int | None):
        try:
            return render(value, form, indent)
        except Unwritable as exc:
            raise self.fail(str(exc), k + 2 if k is not None else 0) from None

    # -- remove ---------------------------------------------------------------------------------
    def remove(self) -> bytes:
        parts = self.key.split(".")
        if get_path(self.fm, parts) is MISSING:
            return self.data
        parent = get_path(self.fm, parts[:-1]) if len(parts) > 1 else self.fm
        if len(parts) > 1 and len(parent) == 1:  # its mapping would be left empty: it becomes {}
            return self.replace(parts[:-1], {}, MISSING)
        sp = self.split
        k = self.index(parts)
        end = extent(sp.lines, k)
        return self.check(sp.lines[:k] + sp.lines[end:], sp.ends[:k] + sp.ends[end:], MISSING)

    # -- the proof ------------------------------------------------------------------------------
    def check(self, lines: list[str], ends: list[str], want) -> bytes:
        out = self.split.join(lines, ends, self.nl().encode())
        parts = self.key.split(".")
        expected = copy.deepcopy(self.fm)
        if want is MISSING:
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
        if not same_mapping(parsed.data, expected):
            changed = sorted(
                k
                for k in set(expected) | set(parsed.data)
                if not same(expected.get(k, MISSING), parsed.data.get(k, MISSING))
            )
            raise self.fail(
                "the edit would not read back as meant; it would change " + ", ".join(changed or [self.key])
            )
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
    try:
        return _Doc(data, path, key).set(value, after)
    except (IndexError, KeyError) as exc:  # the key's place not found in the lines: this one note refused
        raise _unplaced(path, key, exc) from exc


def _unplaced(path: str, key: str, exc: Exception) -> FrontmatterEditError:
    return FrontmatterEditError(
        path, key, f"the editor cannot find the key's lines ({type(exc).__name__}: {exc}); not edited"
    )


def remove_key(data: bytes, key: str, *, path: str = "") -> bytes:
    """``data`` without frontmatter ``key`` and its value's lines; unchanged when it is absent.
    Removing the last key of a nested mapping leaves the mapping as ``{}``."""
    try:
        return _Doc(data, path, key).remove()
    except (IndexError, KeyError) as exc:  # as in set_key
        raise _unplaced(path, key, exc) from exc


def value_form(data: bytes, key: str, *, path: str = "") -> str:
    """How ``key``'s value is written: ``plain``, ``lenient`` (plain text the parser reads
    leniently, e.g. ``match: | tail``), ``single``, ``double``, ``flow``, ``flowmap``,
    ``block-scalar``, ``block-list``, ``block-map``, ``empty``; ``absent`` when there is none."""
    doc = _Doc(data, path, key)
    parts = key.split(".")
    if get_path(doc.fm, parts) is MISSING:
        return "absent"
    k = doc.index(parts)
    return form_of(doc.split.lines, k, extent(doc.split.lines, k), doc.lenient(k)).kind
