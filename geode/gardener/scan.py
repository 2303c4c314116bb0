"""One pass over the ledger window: what the Gardener learns from use.

The window is the last ``window_days`` of *ledger time*: it ends at the newest row, not at the
wall clock, so a ledger whose hooks stopped writing a month ago is judged on the month it
holds, not reported as a month of silence. Rows are read once, in session order
(``session``, ``id``), streamed, so the memory it takes grows with the crystals and the
lookups, not with the rows.

From that pass:

- ``blocked``: every blocked lookup with the terms and files its command hunted for;
- ``observed``: per session, the terms of its lookups (blocked and marked) and of its search
  queries, with the rows they came from; ``touched``: the notes a session's lookups named or
  its searches found;
- ``matched``: crystals that matched an action at all (delivered, withheld by the control
  arm, skipped for budget, backed off, denied once);
- ``deliveries``: per crystal, deliveries after its salience watermark, and how many of them
  unlocked work (delivered, and no lookup followed in that session);
- ``searched``: per note, the searches that found it, with the action and terms of the rows
  that came just before each search in the same session.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from geode.delivery.ledger import skipped_items
from geode.gardener.terms import Hunt, detail_of, event_hunt, fold_term, query_words

MATCH_KINDS = ("delivered", "withheld", "skipped_budget", "suppressed_backoff", "denied_once")
LOOKUP_KINDS = ("blocked", "lookup_marked")
ACTIONS = ("bash", "write", "edit", "read", "commit")
#: rows before a search that count as "the action that preceded it": at most this many, and
#: no older than this many seconds before the search
CONTEXT_ROWS = 3
CONTEXT_SECONDS = 15 * 60
#: evidence cited per proposal at most (the newest rows)
MAX_EVIDENCE = 100


@dataclass
class Blocked:
    id: int
    ts: float
    session: str
    domain: str
    tool: str
    terms: list[str]
    files: list[str]
    before: tuple[str, ...] = ()  # actions of the rows just before it in its session


@dataclass
class Delivered:
    count: int = 0
    unlocked: int = 0
    ids: deque = field(default_factory=lambda: deque(maxlen=MAX_EVIDENCE))
    max_id: int = 0


@dataclass
class Searched:
    count: int = 0
    ids: list[int] = field(default_factory=list)
    sessions: set = field(default_factory=set)
    #: one entry per search with a session: (actions before it, terms before it, row ids)
    contexts: list[tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]] = field(default_factory=list)


@dataclass
class Scan:
    total_rows: int = 0
    ledger_first_ts: float = 0.0
    ledger_last_ts: float = 0.0
    window_start: float = 0.0
    rows: int = 0  # rows in the window
    first_ts: float = 0.0
    last_ts: float = 0.0
    by_kind: Counter = field(default_factory=Counter)
    blocked: list[Blocked] = field(default_factory=list)
    blocked_without_terms: int = 0
    matched: set = field(default_factory=set)
    deliveries: dict = field(default_factory=dict)  # crystal_id -> Delivered
    searched: dict = field(default_factory=dict)  # domain:path -> Searched
    observed: dict = field(default_factory=dict)  # session -> list[(term, row id)]
    touched: dict = field(default_factory=dict)  # session -> set of domain:path / stems
    sessions: int = 0


def _table():
    from geode.records.models import LedgerEvent, table_of

    return table_of(LedgerEvent)


def agents_rows(t):
    """Rows an agent's work wrote: a person's hand call of ``geode deliver`` (its session starts
    with ``manual:``) is a try, not use, and is left out of everything the Gardener counts."""
    from sqlalchemy import or_

    from geode.delivery.control import MANUAL_SESSION_PREFIX

    return or_(t.c.session.is_(None), t.c.session.notlike(MANUAL_SESSION_PREFIX + "%"))


def summary(engine) -> tuple[int, float, float]:
    """``(rows, first ts, last ts)`` of the whole ledger, hand calls left out; ``(0, 0, 0)``
    when there is none (no table yet counts as none)."""
    from sqlalchemy import func, inspect, select

    if engine is None or not inspect(engine).has_table("ledger_event"):
        return 0, 0.0, 0.0
    t = _table()
    with engine.connect() as conn:
        n, lo, hi = conn.execute(select(func.count(), func.min(t.c.ts), func.max(t.c.ts)).where(agents_rows(t))).one()
    return int(n or 0), float(lo or 0.0), float(hi or 0.0)


def scan(
    engine,
    roots: dict[str, str],
    window_s: float,
    watermarks: dict[str, int] | None = None,
    consumed: set[int] | None = None,
) -> Scan:
    """Read the window once (see the module's docstring). ``watermarks``: crystal id -> the
    newest delivery row already used by an earlier salience proposal (older ones are not
    counted again); ``consumed``: blocked rows an earlier stub proposal already cited."""
    from sqlalchemy import select

    watermarks = watermarks or {}
    consumed = consumed or set()
    s = Scan()
    s.total_rows, s.ledger_first_ts, s.ledger_last_ts = summary(engine)
    if s.total_rows == 0:
        return s
    s.window_start = s.ledger_last_ts - window_s
    t = _table()
    q = (
        select(t.c.id, t.c.ts, t.c.kind, t.c.session, t.c.domain, t.c.crystal_id, t.c.action, t.c.term, t.c.detail)
        .where(t.c.ts >= s.window_start, agents_rows(t))
        .order_by(t.c.session, t.c.id)
    )

    cur_session = None
    recent: deque = deque(maxlen=CONTEXT_ROWS)  # (ts, action, terms, id, an act rather than a lookup)
    pending: list[tuple[int, str]] = []  # deliveries not yet followed by a lookup in this session

    def end_session():
        for rid, cid in pending:  # no lookup came after these: they unlocked work
            d = s.deliveries.get(cid)
            if d is not None and rid > watermarks.get(cid, 0):
                d.unlocked += 1
        pending.clear()
        recent.clear()

    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=5000).execute(q)
        for rid, ts, kind, session, domain, cid, action, term, detail in result:
            if session != cur_session:
                end_session()
                cur_session = session
                s.sessions += 1
            s.rows += 1
            s.by_kind[kind] += 1
            if s.first_ts == 0.0 or ts < s.first_ts:
                s.first_ts = ts
            if ts > s.last_ts:
                s.last_ts = ts
            if kind in MATCH_KINDS:
                if kind == "skipped_budget":  # one row per crystal (older) or per action (the skipped set)
                    pairs = skipped_items(cid or "", term or "", detail or "")
                    s.matched.update(c for c, _t in pairs)
                    terms = tuple(dict.fromkeys(fold_term(t) for _c, t in pairs if t))
                else:
                    if cid:
                        s.matched.add(cid)
                    terms = (fold_term(term),) if term else ()
                if action in ACTIONS:
                    recent.append((ts, action, terms, rid, True))
                if kind == "delivered" and cid and session:  # a delivery outside a session cannot be judged
                    if rid > watermarks.get(cid, 0):
                        d = s.deliveries.get(cid)
                        if d is None:
                            d = s.deliveries[cid] = Delivered()
                        d.count += 1
                        d.ids.append(rid)
                        d.max_id = max(d.max_id, rid)
                        pending.append((rid, cid))
                continue
            if kind in LOOKUP_KINDS:
                pending.clear()  # a lookup followed every delivery so far in this session
                det = detail_of(detail)
                hunt: Hunt = event_hunt(det, roots)
                tool = hunt.tool or str(det.get("tool") or "")
                if session:
                    obs = s.observed.setdefault(session, [])
                    for tm in hunt.terms:
                        obs.append((tm, rid))
                    if hunt.files:
                        s.touched.setdefault(session, set()).update(hunt.files)
                if kind == "blocked":
                    if not hunt.terms:
                        s.blocked_without_terms += 1
                    elif rid not in consumed:
                        before = tuple(r[1] for r in recent if r[4] and ts - r[0] <= CONTEXT_SECONDS) if session else ()
                        s.blocked.append(
                            Blocked(rid, ts, session, domain, tool or "Bash", hunt.terms, hunt.files, before)
                        )
                if hunt.terms:
                    recent.append((ts, "read" if tool == "Read" else "bash", tuple(hunt.terms), rid, False))
                continue
            if kind == "searched":
                det = detail_of(detail)
                hits = [str(h) for h in (det.get("hits") or []) if isinstance(h, str)]
                words = query_words(str(det.get("query") or ""))
                if session:
                    obs = s.observed.setdefault(session, [])
                    for w in words:
                        obs.append((w, rid))
                    if hits:
                        s.touched.setdefault(session, set()).update(hits)
                ctx = [r for r in recent if ts - r[0] <= CONTEXT_SECONDS] if session else []
                for h in dict.fromkeys(hits):
                    e = s.searched.get(h)
                    if e is None:
                        e = s.searched[h] = Searched()
                    e.count += 1
                    if len(e.ids) < MAX_EVIDENCE:
                        e.ids.append(rid)
                    if session:
                        e.sessions.add(session)
                        if ctx:
                            e.contexts.append(
                                (
                                    tuple(r[1] for r in ctx),
                                    tuple(sorted({x for r in ctx for x in r[2]})),
                                    tuple(r[3] for r in ctx),
                                )
                            )
        end_session()
    return s
