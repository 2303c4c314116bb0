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
YYYY-MM-DD, unbounded: ``geode.kernel.dates.ValidityWindow``, the reading of every room).
``after`` and ``as_of`` must be dates (``FilterError`` otherwise).

Apart from ``geode.recall.search`` (ranking) because the filter language is its own small
grammar, read by the command line (``--where``) and the page as well as by search.
"""

from __future__ import annotations

from geode.kernel.dates import DateError, iso
from geode.kernel.errors import UsageError
from geode.recall.sqlread import in_list

MAX_CONTAINS_ANY = 100


class FilterError(UsageError, ValueError):
    """A filter that cannot be applied; the message says which and why."""


# -- filters -------------------------------------------------------------------------------
def tag_aliases(settings) -> dict[str, dict[str, str]]:
    """``{domain: {alias: canonical}}`` from ``[recall.tag_aliases.<domain>]`` (lower-cased)."""
    raw = settings.recall.tag_aliases  # checked by load_settings: {domain: {alias: tag}}
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


class Where:
    """The filters as SQL text on ``recall_note``: ``parts`` is one (condition, its params) per
    filter, ``len()`` how many; ``sql``/``params`` the conditions AND-ed (``1 = 1`` when none).
    Parameter names start with ``f`` and a number, so they never meet a query's own."""

    def __init__(self, parts: list[tuple[str, dict]] | None = None, probes: list[str] | None = None) -> None:
        self.parts = list(parts or [])
        self.probes = list(probes) if probes is not None else [s for s, _p in self.parts]
        self._n = 0

    def __len__(self) -> int:
        return len(self.parts)

    def name(self) -> str:
        self._n += 1
        return f"f{self._n}_"

    def add(self, sql: str, params: dict, probe: str | None = None) -> None:
        self.parts.append((sql, params))
        self.probes.append(sql if probe is None else probe)

    @property
    def sql(self) -> str:
        return " AND ".join(f"({s})" for s, _p in self.parts) if self.parts else "1 = 1"

    @property
    def probe_sql(self) -> str:
        """The same conditions for a read that a short list of candidate notes drives (each
        looked up by id): a tag or frontmatter filter as a correlated ``EXISTS`` on the note's
        own rows (``ix_recall_tag_note``, ``ix_recall_fm_note``: a few rows per candidate). The
        ``id IN (subquery)`` of ``sql`` would read the whole subquery once per statement: 23,000
        tag rows for each 500 candidates of a 23% tag at 100,000 notes (200 ms). SQLite only: the
        domain is written ``+recall_note.domain`` (no index may drive by it)."""
        return " AND ".join(f"({s})" for s in self.probes) if self.probes else "1 = 1"  # SQLite's

    @property
    def params(self) -> dict:
        out: dict = {}
        for _s, p in self.parts:
            out.update(p)
        return out

    def key(self) -> str:
        """What tells two scopes apart (the cached count of notes in scope)."""
        return self.sql + "\x00" + repr(sorted(self.params.items()))


def as_where(conds) -> Where:
    """``Where`` as it is; an empty list (no filter) as an empty ``Where``."""
    if isinstance(conds, Where):
        return conds
    if not conds:
        return Where()
    raise TypeError("filters are a Where (filters.filter_where), not SQLAlchemy conditions")


def _fm_in(w: Where, key: str, cond: str, params: dict, negate: bool = False) -> tuple[str, str]:
    """``recall_note.id [NOT] IN`` the notes whose frontmatter ``key`` meets ``cond``, and the
    same as a correlated ``[NOT] EXISTS`` (``Where.probe_sql``).

    Why ``id IN (subquery)`` and not a correlated ``EXISTS`` for a scope: the subquery is driven
    by ``ix_recall_fm_key_val`` and the notes are then looked up by id, so a narrow filter reads
    its notes and not the whole table; an ``EXISTS`` is evaluated once per note, which no index
    can drive (100 ms a count at 100,000 notes). ``note_id`` is never NULL, so ``NOT IN`` is
    exactly ``NOT EXISTS``."""
    k = w.name()
    params[k + "k"] = key
    sub = f"FROM recall_fm WHERE recall_fm.key = :{k}k AND {cond}"
    not_ = "NOT " if negate else ""
    return (
        f"recall_note.id {not_}IN (SELECT recall_fm.note_id {sub})",
        f"{not_}EXISTS (SELECT 1 {sub} AND recall_fm.note_id = recall_note.id)",
    )


def _where_cond(w: Where, key: str, spec, params: dict) -> tuple[str, str]:
    """The filter on frontmatter ``key`` as (``Where.sql`` form, ``Where.probe_sql`` form)."""
    if isinstance(spec, dict) and spec and all(str(k).startswith("$") for k in spec):
        conds = []
        for op, val in spec.items():
            p = w.name()
            if op in ("$eq", "$contains"):
                params[p] = _lower(val)
                conds.append(_fm_in(w, key, f"recall_fm.val = :{p}", params))
            elif op == "$ne":
                params[p] = _lower(val)
                conds.append(_fm_in(w, key, f"recall_fm.val = :{p}", params, negate=True))
            elif op in ("$in", "$contains_any"):
                vals = _as_list(val)
                if op == "$contains_any" and len(vals) > MAX_CONTAINS_ANY:
                    raise FilterError(f"{key}: $contains_any takes at most {MAX_CONTAINS_ANY} values, got {len(vals)}")
                if not vals:
                    raise FilterError(f"{key}: {op} needs at least one value")
                cond = in_list("recall_fm.val", [_lower(v) for v in vals], params, p)
                conds.append(_fm_in(w, key, cond, params))
            elif op == "$nin":
                cond = in_list("recall_fm.val", [_lower(v) for v in _as_list(val)], params, p)
                conds.append(_fm_in(w, key, cond, params, negate=True))
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                numeric = isinstance(val, (int, float)) and not isinstance(val, bool)
                col = "recall_fm.num" if numeric else "recall_fm.val"
                params[p] = float(val) if numeric else _lower(val)
                sym = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
                conds.append(_fm_in(w, key, f"{col} IS NOT NULL AND {col} {sym} :{p}", params))
            elif op == "$exists":
                conds.append(_fm_in(w, key, "1 = 1", params, negate=not val))
            else:
                raise FilterError(f"{key}: unknown operator {op}")
        return " AND ".join(c for c, _e in conds), " AND ".join(e for _c, e in conds)
    if isinstance(spec, (list, tuple)):
        return _where_cond(w, key, {"$in": list(spec)}, params)
    if isinstance(spec, dict):
        raise FilterError(f"{key}: a filter is a value or a table of $-operators")
    p = w.name()
    params[p] = _lower(spec)
    return _fm_in(w, key, f"recall_fm.val = :{p}", params)


def _tag_in(w: Where, tag: str, doms: list[str], aliases: dict[str, dict[str, str]]) -> tuple[str, dict, str]:
    """The notes holding ``tag`` (through each domain's aliases) as ``recall_note.id IN (SELECT
    note_id FROM recall_tag ...)``, driven by ``ix_recall_tag_tag`` (see ``_fm_in`` for why not
    ``EXISTS``). Domains whose aliases expand the tag alike share one subquery; the domain is
    named only when they do not all share it (the domain filter already holds the rest)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for d in doms:
        groups.setdefault(tuple(sorted(expand_tag(tag, aliases.get(d, {})))), []).append(d)
    p: dict = {}
    alts = []
    for names, ds in groups.items():
        n = w.name()
        tin = in_list("recall_tag.tag", list(names), p, n + "t")
        sub = f"recall_note.id IN (SELECT recall_tag.note_id FROM recall_tag WHERE {tin})"
        probe = f"EXISTS (SELECT 1 FROM recall_tag WHERE {tin} AND recall_tag.note_id = recall_note.id)"
        if len(groups) > 1:
            dom = in_list("recall_note.domain", ds, p, n + "d")
            sub, probe = f"({dom} AND {sub})", f"({dom} AND {probe})"
        alts.append((sub, probe))
    return " OR ".join(a for a, _b in alts), p, " OR ".join(b for _a, b in alts)


def _day(value, name: str) -> str:
    try:
        return iso(value, name)
    except DateError as exc:
        raise FilterError(str(exc)) from None


def filter_where(
    settings, domain=None, type=None, status=None, tags=None, where=None, after=None, as_of=None
) -> tuple[Where, list[str]]:
    """The filters as SQL text on ``recall_note`` (a ``Where``) and the domains in scope."""
    doms = [d for d in _as_list(domain)] or list(settings.domains)
    unknown = [d for d in doms if d not in settings.domains]
    if unknown:
        raise FilterError(f"unknown domain {unknown[0]!r}; known: {', '.join(settings.domains)}")
    w = Where()
    p: dict = {}
    n = w.name()
    # the probe form keeps the domain out of any index (``+``): candidates are looked up by id,
    # and the domain's indexes would walk every note of the domain instead
    w.add(in_list("recall_note.domain", doms, p, n), p, in_list("+recall_note.domain", doms, {}, n))
    if type:
        p = {}
        w.add(in_list("recall_note.type", [_lower(t) for t in _as_list(type)], p, w.name()), p)
    if status:
        p = {}
        w.add(in_list("recall_note.status", [_lower(s) for s in _as_list(status)], p, w.name()), p)
    if tags:
        aliases = tag_aliases(settings)
        for tag in _as_list(tags):
            w.add(*_tag_in(w, str(tag), doms, aliases))
    for key, spec in (where or {}).items():
        p = {}
        sql, probe = _where_cond(w, str(key), spec, p)
        w.add(sql, p, probe)
    if after not in (None, ""):
        n = w.name()
        w.add(f"recall_note.recorded >= :{n}", {n: _day(after, "after")})
    if as_of not in (None, ""):
        # ValidityWindow.contains in SQL: valid_from <= day <= valid_to, both inclusive, NULL
        # unbounded. The columns hold YYYY-MM-DD (recall_index normalises them), so text
        # order is day order.
        d = _day(as_of, "as_of")
        n = w.name()
        w.add(f"recall_note.valid_from IS NULL OR recall_note.valid_from <= :{n}", {n: d})
        n = w.name()
        w.add(f"recall_note.valid_to IS NULL OR recall_note.valid_to >= :{n}", {n: d})
    return w, doms


def filter_conditions(
    settings, domain=None, type=None, status=None, tags=None, where=None, after=None, as_of=None
) -> tuple[list, list[str]]:
    """The same filters as SQLAlchemy conditions on ``recall_note`` (one per filter), for the
    queries built with SQLAlchemy (the page's facets), and the domains in scope."""
    from sqlalchemy import text

    w, doms = filter_where(settings, domain, type, status, tags, where, after, as_of)
    return [text(f"({s})").bindparams(**p) for s, p in w.parts], doms
