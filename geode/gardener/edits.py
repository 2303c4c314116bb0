"""Frontmatter edits as bytes: a salience line, match terms appended, a binding added.

Each edit touches frontmatter lines only and keeps every other byte (BOM, line endings, the
body, invalid UTF-8 in the body). Each result is read back with the delivery core's own
parser and refused (``None``) unless it says exactly what was meant and nothing else changed:
the body is the same, the other frontmatter keys are the same.
"""

from __future__ import annotations

import re

from geode.delivery.binding import parse_binding
from geode.delivery.crystal import NoteError
from geode.delivery.note import parse_note

_BOM = b"\xef\xbb\xbf"


def _split(data: bytes):
    """``(bom, lines with their endings, index of the closing fence line)``; the fence
    index is None when the file has no frontmatter."""
    bom = _BOM if data.startswith(_BOM) else b""
    lines = data[len(bom):].splitlines(keepends=True)
    if not lines or lines[0].rstrip(b"\r\n").rstrip() != b"---":
        return bom, lines, None
    for i in range(1, len(lines)):
        if lines[i].rstrip(b"\r\n").rstrip() in (b"---", b"..."):
            return bom, lines, i
    return bom, lines, None


def _nl(lines: list[bytes]) -> bytes:
    for ln in lines[:50]:
        if ln.endswith(b"\r\n"):
            return b"\r\n"
        if ln.endswith(b"\n"):
            return b"\n"
    return b"\n"


def _parse(data: bytes, path: str):
    try:
        return parse_note(data.decode("utf-8"), path)
    except (UnicodeDecodeError, NoteError):  # not a readable note: the caller treats it as unparsable
        return None


def _same_except(old, new, keys: set[str]) -> bool:
    if old is None or new is None or old.body != new.body:
        return False
    a = {k: v for k, v in old.frontmatter.items() if k not in keys}
    b = {k: v for k, v in new.frontmatter.items() if k not in keys}
    return a == b


def set_salience(data: bytes, path: str, value: float) -> bytes | None:
    """``data`` with the top-level ``salience:`` set to ``value`` (added when absent)."""
    bom, lines, end = _split(data)
    if end is None:
        return None
    text = f"salience: {value:g}".encode()
    pat = re.compile(rb"^salience[ \t]*:")
    idx = next((i for i in range(1, end) if pat.match(lines[i])), None)
    nl = _nl(lines)
    if idx is not None:
        ending = lines[idx][len(lines[idx].rstrip(b"\r\n")):] or nl
        lines[idx] = text + ending
    else:
        lines.insert(end, text + nl)
    out = bom + b"".join(lines)
    old, new = _parse(data, path), _parse(out, path)
    if not _same_except(old, new, {"salience"}):
        return None
    try:
        if abs(float(new.frontmatter.get("salience")) - value) > 1e-9:
            return None
    except (TypeError, ValueError):
        return None
    return out


_SAFE_TERM = re.compile(r"[a-z0-9][a-z0-9 _./\-]*[a-z0-9]")


def widen_match(data: bytes, path: str, new_terms: list[str]) -> bytes | None:
    """``data`` with ``new_terms`` appended to ``crystal.match`` in the form it is written in
    (a quoted string, a plain string, a flow list, a block list); None when the form is one
    this does not rewrite or the result does not read back as the old terms plus the new."""
    if not new_terms or not all(_SAFE_TERM.fullmatch(t) for t in new_terms):
        return None
    old = _parse(data, path)
    if old is None or not isinstance(old.frontmatter.get("crystal"), dict):
        return None
    line_no = old.fm_lines.get("crystal.match")
    if not line_no:
        return None
    bom, lines, end = _split(data)
    i = line_no - 1
    if end is None or not 0 < i < end:
        return None
    raw = lines[i]
    body = raw.rstrip(b"\r\n")
    ending = raw[len(body):]
    m = re.match(rb"^(\s*match[ \t]*:[ \t]*)(.*?)[ \t]*$", body)
    if m is None:
        return None
    head, value = m.group(1), m.group(2)
    add_plain = ", ".join(new_terms).encode()
    if value.startswith(b"#") or value == b"":
        # a block list below the key
        j = i + 1
        indent = None
        last = None
        while j < end:
            mm = re.match(rb"^(\s+)-[ \t]", lines[j])
            if mm is None:
                if lines[j].strip() == b"" or lines[j].lstrip().startswith(b"#"):
                    j += 1
                    continue
                break
            indent, last = mm.group(1), j
            j += 1
        if last is None:
            return None
        nl = lines[last][len(lines[last].rstrip(b"\r\n")):] or _nl(lines)
        if not lines[last].endswith((b"\n", b"\r")):
            lines[last] = lines[last] + nl
        extra = [indent + b"- " + t.encode() + nl for t in new_terms]
        lines[last + 1:last + 1] = extra
    elif value[:1] in (b'"', b"'") and len(value) >= 2 and value[-1:] == value[:1]:
        q = value[:1]
        inner = value[1:-1].rstrip()
        sep = b", " if inner.strip() else b""
        lines[i] = head + q + inner + sep + add_plain + q + ending
    elif value.startswith(b"[") and value.endswith(b"]"):
        inner = value[1:-1].rstrip()
        sep = b", " if inner.strip() else b""
        lines[i] = head + b"[" + inner + sep + add_plain + b"]" + ending
    elif value[:1] in (b"|", b">") and value.strip() in (b"|", b">", b"|-", b">-", b"|+", b">+"):
        return None  # a block scalar: several lines of terms, not rewritten
    elif value[:1] in (b'"', b"'", b"{", b"&", b"*", b"!"):
        return None
    else:
        if b" #" in value:
            return None  # a comment after a plain value: appending would land inside it
        lines[i] = head + value.rstrip(b", ") + b", " + add_plain + ending
    out = bom + b"".join(lines)
    new = _parse(out, path)
    if not _same_except(old, new, {"crystal"}):
        return None
    oc, nc = old.frontmatter["crystal"], new.frontmatter.get("crystal")
    if not isinstance(nc, dict) or {k: v for k, v in oc.items() if k != "match"} != \
            {k: v for k, v in nc.items() if k != "match"}:
        return None
    ob = parse_binding(oc, old.fm_lines)
    nb = parse_binding(nc, new.fm_lines)
    if list(nb.terms) != list(ob.terms) + [t for t in new_terms if t not in ob.terms]:
        return None
    return out


def add_binding(data: bytes, path: str, on: str, terms: list[str]) -> bytes | None:
    """``data`` with a ``crystal:`` block (deliver act, on, match, who all) at the end of its
    frontmatter, or a new frontmatter holding only that block. None when the file already has a
    ``crystal`` key or the result does not read back as that binding with nothing else changed."""
    if not terms or not all(_SAFE_TERM.fullmatch(t) for t in terms):
        return None
    old = _parse(data, path)
    if old is None or "crystal" in old.frontmatter:
        return None
    bom, lines, end = _split(data)
    nl = _nl(lines)
    match = ", ".join(terms)
    block = [b"crystal:", b"  deliver: act", b"  on: " + on.encode(), b'  match: "' + match.encode() + b'"',
             b"  who: all"]
    if end is None:
        if lines and lines[0].rstrip(b"\r\n").rstrip() == b"---":
            return None  # an opening fence that is never closed: not ours to repair
        out = bom + b"".join(ln + nl for ln in [b"---", *block, b"---"]) + b"".join(lines)
    else:
        lines[end:end] = [ln + nl for ln in block]
        out = bom + b"".join(lines)
    new = _parse(out, path)
    if new is None or new.body != old.body:
        return None
    if {k: v for k, v in new.frontmatter.items() if k != "crystal"} != old.frontmatter:
        return None
    crystal = new.frontmatter.get("crystal")
    if not isinstance(crystal, dict):
        return None
    b = parse_binding(crystal, new.fm_lines)
    if b.deliver != ("act",) or b.on != (on,) or list(b.terms) != list(terms):
        return None
    return out
