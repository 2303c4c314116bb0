"""The Gardener's frontmatter edits: a salience value, match terms appended, a binding added.

Each is one call of the one frontmatter editor (``geode.kernel.frontmatter_edit``), which
replaces one key's whole value, keeps every other byte (BOM, line endings, the body, invalid
UTF-8 in the body, other keys and their comments) and re-reads the result with the delivery
core's own parser: it raises ``FrontmatterEditError`` (naming the file and the key) unless the
result says exactly what was meant and nothing else changed. On top of that, a widened match and
a new binding are read back as a binding (``parse_binding``) and must give exactly the terms
meant. ``None``: the edit does not apply (no safe terms, no match to widen, a binding already
there, a match written as a block scalar).
"""

from __future__ import annotations

import re

from geode.delivery.binding import parse_binding
from geode.delivery.match import is_short_option
from geode.kernel.crystal import NoteError
from geode.kernel.frontmatter_edit import (
    FrontmatterEditError,
    set_key,
    value_form,
)
from geode.kernel.frontmatter_values import Quoted
from geode.kernel.note import parse_note

__all__ = ["FrontmatterEditError", "add_binding", "set_salience", "widen_match"]


def _parse(data: bytes, path: str):
    try:
        return parse_note(data.decode("utf-8"), path)
    except (UnicodeDecodeError, NoteError):  # not a readable note: the caller treats it as unparsable
        return None


def set_salience(data: bytes, path: str, value: float) -> bytes:
    """``data`` with the top-level ``salience:`` set to ``value`` (added when absent; a whole
    number is written without a fraction: ``1``, ``0``)."""
    number = int(value) if float(value).is_integer() else float(value)
    return set_key(data, "salience", number, path=path)


#: a term the Gardener writes: words lower-case, a short option as written (``git branch -D``,
#: ``terms.fold_term``); checked with ``_safe_term``
_SAFE_TERM = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9 _./\-]*[a-zA-Z0-9]")
#: the forms of ``crystal.match`` that are rewritten (a block scalar's lines of terms are not)
_WIDENABLE = ("plain", "lenient", "single", "double", "flow", "block-list")


def widen_match(data: bytes, path: str, new_terms: list[str]) -> bytes | None:
    """``data`` with ``new_terms`` appended to ``crystal.match``, kept in the form it is written in
    (a quoted string stays quoted, a plain string plain, a flow list a flow list, a block list a
    block list); None when the terms are not safe, there is no match, or it is written in a form
    this does not rewrite; ``FrontmatterEditError`` when the edit is not safe."""
    if not new_terms or not all(_safe_term(t) for t in new_terms):
        return None
    old = _parse(data, path)
    if old is None or not isinstance(old.frontmatter.get("crystal"), dict) or "match" not in old.crystal:
        return None
    if value_form(data, "crystal.match", path=path) not in _WIDENABLE:
        return None
    current = old.crystal["match"]
    value: list | str  # the form it had: a list stays a list, a comma string a comma string
    if isinstance(current, list):
        value = [*current, *new_terms]
    elif isinstance(current, str):
        base = current.rstrip(", ")
        value = base + (", " if base.strip() else "") + ", ".join(new_terms)
    else:
        return None
    out = set_key(data, "crystal.match", value, path=path)
    new = _parse(out, path)
    ob = parse_binding(old.crystal, old.fm_lines)
    nb = parse_binding(new.crystal, new.fm_lines) if new is not None and new.crystal is not None else None
    if nb is None or list(nb.terms) != list(ob.terms) + [t for t in new_terms if t not in ob.terms]:
        raise FrontmatterEditError(
            path, "crystal.match", "the widened match would not read back as the old terms plus " + ", ".join(new_terms)
        )
    return out


def _safe_term(t: str) -> bool:
    """Plain characters only, and no capital outside a short option (``-D``)."""
    return bool(_SAFE_TERM.fullmatch(t)) and all(w == w.lower() or is_short_option(w) for w in t.split())


def add_binding(data: bytes, path: str, on: str, terms: list[str]) -> bytes | None:
    """``data`` with a ``crystal:`` block (deliver act, on, match, who all) at the end of its
    frontmatter, or a new frontmatter holding only that block. None when the terms are not safe
    or the file already has a ``crystal`` key; ``FrontmatterEditError`` when the edit is not safe
    or does not read back as that binding."""
    if not terms or not all(_safe_term(t) for t in terms):
        return None
    old = _parse(data, path)
    if old is None or "crystal" in old.frontmatter:
        return None
    block = {"deliver": "act", "on": on, "match": Quoted(", ".join(terms)), "who": "all"}
    out = set_key(data, "crystal", block, path=path)
    new = _parse(out, path)
    crystal = new.frontmatter.get("crystal") if new is not None else None
    b = parse_binding(crystal, new.fm_lines) if isinstance(crystal, dict) else None
    if b is None or b.deliver != ("act",) or b.on != (on,) or list(b.terms) != list(terms):
        raise FrontmatterEditError(
            path, "crystal", f"the new binding would not read back as act on {on} matching {', '.join(terms)}"
        )
    return out
