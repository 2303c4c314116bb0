"""The filters of a search, as SQL conditions on ``recall_note``.

Filters (all optional, combined with AND): ``domain``, ``type``, ``status``, ``tags`` (each tag
matches through the domain's ``[recall.tag_aliases.<domain>]`` table: ``old = "new"`` makes
``old`` and ``new`` the same tag), ``where`` (any frontmatter key: a value means equality, and on a
list field "the list holds it"; ``{"$in": [...]}``, ``{"$nin": [...]}``, ``{"$ne": v}``,
``{"$contains": v}``, ``{"$contains_any": [...]}`` (at most 100 values), ``{"$gt"|"$gte"|"$lt"|"$lte": v}``
(numbers compare as numbers, anything else as text, so ISO dates work), ``{"$exists": bool}``;
a scalar counts as a list of one), ``after`` (recorded on or after a date: frontmatter
``recorded``/``created``/``date``, else the file's mtime), ``as_of`` (``valid_from <= as_of <=
valid_to``, inclusive: ``valid_to`` is the last day a note holds; an absent date, or one that is not
YYYY-MM-DD, unbounded: ``geode.delivery.dates.ValidityWindow``, the reading of every room).
``after`` and ``as_of`` must be dates (``FilterError`` otherwise).

Apart from ``geode.recall.search`` (ranking) because the filter language is its own small
grammar, read by the command line (``--where``) and the page as well as by search.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, exists, literal_column, not_, or_, select

from geode.delivery.dates import DateError, iso
from geode.delivery.errors import UsageError
from geode.recall.index_tables import fm_t, notes_t, tags_t

MAX_CONTAINS_ANY = 100


class FilterError(UsageError, ValueError):
    """A filter that cannot be applied; the message says which and why."""


# -- filters -------------------------------------------------------------------------------
def tag_aliases(settings) -> dict[str, dict[str, str]]:
    """``{domain: {alias: canonical}}`` from ``[recall.tag_aliases.<domain>]`` (lower-cased)."""
    raw = settings.recall["tag_aliases"]  # checked by load_settings: {domain: {alias: tag}}
    return {dom: {k.lower(): v.lower() for k, v in table.items()} for dom, table in raw.items()}


def expand_tag(tag: str, aliases: dict[str, str]) -> set[str]:
    """The tag, its canonical form and every alias of that form."""
    t = tag.lower().lstrip("#")
    canon = aliases.get(t, t)
    return {t, canon} | {a for a, c in aliases.items() if c == canon}


def _as_list(v):
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple, set)) else [v]


def _lower(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v).lower()


def _fm_exists(key: str, cond):
    return exists(select(fm_t.c.note_id).where(fm_t.c.note_id == notes_t.c.id, fm_t.c.key == key, cond))


def _where_cond(key: str, spec):
    if isinstance(spec, dict) and spec and all(str(k).startswith("$") for k in spec):
        conds = []
        for op, val in spec.items():
            if op in ("$eq", "$contains"):
                conds.append(_fm_exists(key, fm_t.c.val == _lower(val)))
            elif op == "$ne":
                conds.append(not_(_fm_exists(key, fm_t.c.val == _lower(val))))
            elif op in ("$in", "$contains_any"):
                vals = _as_list(val)
                if op == "$contains_any" and len(vals) > MAX_CONTAINS_ANY:
                    raise FilterError(f"{key}: $contains_any takes at most {MAX_CONTAINS_ANY} values, got {len(vals)}")
                if not vals:
                    raise FilterError(f"{key}: {op} needs at least one value")
                conds.append(_fm_exists(key, fm_t.c.val.in_([_lower(v) for v in vals])))
            elif op == "$nin":
                conds.append(not_(_fm_exists(key, fm_t.c.val.in_([_lower(v) for v in _as_list(val)]))))
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                numeric = isinstance(val, (int, float)) and not isinstance(val, bool)
                col = fm_t.c.num if numeric else fm_t.c.val
                v = float(val) if numeric else _lower(val)
                cmp = {"$gt": col > v, "$gte": col >= v, "$lt": col < v, "$lte": col <= v}[op]
                conds.append(_fm_exists(key, and_(col.isnot(None), cmp)))
            elif op == "$exists":
                e = _fm_exists(key, literal_column("1") == 1)
                conds.append(e if val else not_(e))
            else:
                raise FilterError(f"{key}: unknown operator {op}")
        return and_(*conds)
    if isinstance(spec, (list, tuple)):
        return _where_cond(key, {"$in": list(spec)})
    if isinstance(spec, dict):
        raise FilterError(f"{key}: a filter is a value or a table of $-operators")
    return _fm_exists(key, fm_t.c.val == _lower(spec))


def _day(value, name: str) -> str:
    try:
        return iso(value, name)
    except DateError as exc:
        raise FilterError(str(exc)) from None


def filter_conditions(
    settings, domain=None, type=None, status=None, tags=None, where=None, after=None, as_of=None
) -> tuple[list, list[str]]:
    """SQL conditions on ``recall_note`` and the domains in scope."""
    doms = [d for d in _as_list(domain)] or list(settings.domains)
    unknown = [d for d in doms if d not in settings.domains]
    if unknown:
        raise FilterError(f"unknown domain {unknown[0]!r}; known: {', '.join(settings.domains)}")
    c = notes_t.c
    conds: list[ColumnElement[bool]] = [c.domain.in_(doms)]
    if type:
        conds.append(c.type.in_([_lower(t) for t in _as_list(type)]))
    if status:
        conds.append(c.status.in_([_lower(s) for s in _as_list(status)]))
    if tags:
        aliases = tag_aliases(settings)
        for tag in _as_list(tags):
            per_dom = [
                and_(c.domain == d, tags_t.c.tag.in_(sorted(expand_tag(str(tag), aliases.get(d, {}))))) for d in doms
            ]
            conds.append(exists(select(tags_t.c.note_id).where(tags_t.c.note_id == c.id, or_(*per_dom))))
    for key, spec in (where or {}).items():
        conds.append(_where_cond(str(key), spec))
    if after not in (None, ""):
        conds.append(c.recorded >= _day(after, "after"))
    if as_of not in (None, ""):
        # ValidityWindow.contains in SQL: valid_from <= day <= valid_to, both inclusive, NULL
        # unbounded. The columns hold YYYY-MM-DD (recall_index normalises them), so text
        # order is day order.
        d = _day(as_of, "as_of")
        conds.append(or_(c.valid_from.is_(None), c.valid_from <= d))
        conds.append(or_(c.valid_to.is_(None), c.valid_to >= d))
    return conds, doms
