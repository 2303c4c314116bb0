"""Frontmatter values for the one editor: compared with their types (``true`` is not ``1``),
normalised as the parser gives them back, and written as YAML text in the form the old value
was written in where the new one fits it, else in the plainest form that reads back as the
value (checked by parsing it again). ``Quoted`` asks for double quotes.

Apart from ``geode.kernel.frontmatter_edit`` (which lines an edit replaces, and the proof that
only that key changed) because writing a value is its own small grammar, with its own failure
(``Unwritable``: a value this format cannot write).
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal

from geode.kernel.errors import GeodeError
from geode.kernel.frontmatter import FrontmatterError, parse_frontmatter
from geode.kernel.frontmatter_lines import Form

MISSING = object()


class Quoted(str):
    """A string to be written double-quoted whatever its content (``match: "| tail, x"``)."""


# -- values: comparing, normalising ---------------------------------------------------------------
def same(a, b) -> bool:
    """Equality that tells ``true`` from ``1`` and ``"1"`` from ``1`` (an int and a float of the
    same number are the same: ``salience: 1`` is ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return same_mapping(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, str) and isinstance(b, str):
        return str(a) == str(b)
    return type(a) is type(b) and a == b


def same_mapping(a: dict, b: dict) -> bool:
    """Same keys with the same values; key ORDER is not compared (an added key goes last)."""
    return set(a) == set(b) and all(same(a[k], b[k]) for k in a)


def prepare(value):
    """``value`` as it is written: dates as ``YYYY-MM-DD`` text, tuples as lists, ``Quoted`` kept."""
    if isinstance(value, Quoted):
        return value
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [prepare(v) for v in value]
    if isinstance(value, dict):
        return {str(k): prepare(v) for k, v in value.items()}
    return value


def normal(value):
    """What the parser gives back for ``value``: dates as ``YYYY-MM-DD`` text, tuples as lists."""
    if isinstance(value, Quoted):
        return str(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [normal(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normal(v) for k, v in value.items()}
    return value


def get_path(data, parts: list[str]):
    cur = data
    for p in parts:
        if not isinstance(cur, dict) or p not in cur:
            return MISSING
        cur = cur[p]
    return cur


# -- writing values -------------------------------------------------------------------------------
class Unwritable(GeodeError):
    pass


def _reads(text: str, value, flow: bool, lenient: bool) -> bool:
    """Whether ``text`` (a scalar as written) reads back as ``value`` with this parser."""
    try:
        parsed = parse_frontmatter(f"k: [{text}]" if flow else f"k: {text}", 2)
    except FrontmatterError:
        return False
    got = parsed.data.get("k", MISSING)
    if flow:
        got = got[0] if isinstance(got, list) and len(got) == 1 else MISSING
    return same(got, value) and (lenient or not parsed.warnings)


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
        elif "\ud800" <= ch <= "\udfff":
            raise Unwritable(f"the value holds a lone surrogate {ch!r}, which no UTF-8 file can hold")
        elif ord(ch) < 32 or ord(ch) == 127:
            raise Unwritable(f"the value holds control character {ch!r}, which this format cannot write")
        elif 0x80 <= ord(ch) <= 0x9F or ch in "\u2028\u2029\ufeff\ufffe\uffff":
            # characters YAML may not hold literally (or reads as line breaks): escaped
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
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
            raise Unwritable(f"{value!r} cannot be written as a number this format reads")
        text = repr(value)
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")
            if "." not in text:
                text += ".0"
        if not _reads(text, value, flow, False):
            raise Unwritable(f"{value!r} does not read back as written")
        return text
    if not isinstance(value, str):
        raise Unwritable(f"a {type(value).__name__} is not a frontmatter value")
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
        raise Unwritable(f"{value!r} does not read back as written")
    return text


def key_text(key: str) -> str:
    return key if _plain_candidate(key, True) and ":" not in key and key.strip() == key else _double(key)


def _flow(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key_text(str(k))}: {_flow(v)}" for k, v in value.items()) + "}"
    return _scalar(value, "none", True)


def render(value, form: Form, indent: int) -> tuple[str, list[str]]:
    """``(inline text after 'key: ', block lines)`` for a key at ``indent``."""
    if isinstance(value, (list, tuple)):
        if form.kind == "block-list" and value:  # (an item with no text would open a nested block)
            return "", [
                " " * form.indent
                + "- "
                + (_flow(v) if v is None or isinstance(v, (list, tuple, dict)) else _scalar(v, "none", False))
                for v in value
            ]
        return _flow(value), []
    if isinstance(value, dict):
        if not value:
            return "{}", []
        if form.kind == "flowmap":
            return _flow(value), []
        child = form.indent if form.kind == "block-map" else indent + 2
        out = []
        for k, v in value.items():
            inline, block = render(v, Form(), child)
            out.append(" " * child + key_text(str(k)) + ":" + (" " + inline if inline else ""))
            out.extend(block)
        return "", out
    return _scalar(value, form.kind, False), []
