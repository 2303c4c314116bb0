"""``geode stats``: what the ledger can count, and nothing it cannot.

Why these figures: they are the ones that answer the usual objections to a delivery count.
Is the store live (delivered at least once vs registered, the never-fired list)? Is the load
spread or one loud crystal (the busiest ten's share, the median fires per crystal)? Does the
agent still go hunting for what it should have been handed (blocked and marked lookups per
thousand deliveries, first half of the window against the second, and the blocked share of
all lookups, which tells a real drop from a change in marking habits)? Deliveries are not
evidence of help; the control arm (``geode study``) is where that question goes.

Works on SQLite and PostgreSQL through SQLAlchemy Core on ``models.LedgerEvent``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.engine import Connection, Engine

from geode.delivery.control import MANUAL_SESSION_PREFIX
from geode.evidence.results import Day, Half, Stats
from geode.kernel.config import Settings
from geode.records.models import LedgerEvent, table_of

T = TypeVar("T")

LOOKUP_KINDS = ("blocked", "lookup_marked")
#: a Read of the full note a cut delivery named (``full note: <path>``): counted on its own, as it is
#: neither a lookup (the agent was sent there) nor silence
FOLLOWED_UP = "followed_up"
#: hook calls that delivered nothing because the binding index could not serve them (issue 22)
UNSERVED_KINDS = ("index_busy", "index_building")
TOP_N = 10
DAY = 86400.0
#: the per-day series keeps at most this many days (the newest): a chart of a year, not of a decade
DAILY_MAX = 366


def with_connection(engine_or_conn: Engine | Connection, fn: Callable[[Connection], T]) -> T:
    """``fn(conn)`` on the connection given, or on one opened (and closed) from the engine given:
    the stats and study reports take either, so a caller inside a transaction reads its own view."""
    if isinstance(engine_or_conn, Engine):
        with engine_or_conn.connect() as conn:
            return fn(conn)
    return fn(engine_or_conn)


def not_manual() -> ColumnElement[bool]:
    """The condition that leaves out the rows of deliveries asked for by hand (``geode deliver``
    without ``--session``): a person trying a crystal is not an agent's delivery."""
    return table_of(LedgerEvent).c.session.notlike(MANUAL_SESSION_PREFIX + "%")


def _window(conn: Connection, days: float | None, now: float) -> tuple[float | None, float]:
    t = table_of(LedgerEvent)
    if days is not None:
        return now - float(days) * DAY, now
    first = conn.execute(select(func.min(t.c.ts)).where(not_manual())).scalar()
    return (float(first) if first is not None else None), now


def _per_1000(numerator: int, deliveries: int) -> float | None:
    return round(1000.0 * numerator / deliveries, 2) if deliveries else None


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _daily(conn: Connection, cond: ColumnElement[bool], start: float | None, end: float) -> list[Day]:
    """Deliveries, blocked and marked lookups per UTC day of the window, every day present (a day
    with nothing is a zero, so a chart's gaps are real). Grouped here, not in SQL, because SQLite
    and PostgreSQL disagree on how a float becomes a day."""
    if start is None:
        return []
    t = table_of(LedgerEvent)
    first_day = int(max(start, end - DAILY_MAX * DAY) // DAY)
    last_day = int(end // DAY)
    days: dict[int, dict[str, int]] = {
        d: {"delivered": 0, "blocked": 0, "lookup_marked": 0} for d in range(first_day, last_day + 1)
    }
    rows = conn.execute(
        select(t.c.ts, t.c.kind).where(cond, t.c.ts >= first_day * DAY, t.c.kind.in_(("delivered",) + LOOKUP_KINDS))
    )
    for ts, kind in rows:
        bucket = days.get(int(float(ts) // DAY))
        if bucket is not None:
            bucket[kind] += 1
    return [
        {
            "day": time.strftime("%Y-%m-%d", time.gmtime(d * DAY)),
            "deliveries": c["delivered"],
            "blocked": c["blocked"],
            "marked": c["lookup_marked"],
        }
        for d, c in sorted(days.items())
    ]


def compute_stats(
    settings: Settings,
    engine_or_conn: Engine | Connection,
    registered: int | Sequence[str],
    oversize: int | Sequence[str],
    days: float | None = None,
    now: float | None = None,
) -> Stats:
    """The figures over a window ending ``now`` (default: the current time).

    ``registered``: the registered crystal ids (a list, so never-fired ones can be named) or
    just their number. ``oversize``: crystals whose essence exceeds the guidance (ids or a
    number; computed by the caller from the store). ``days``: the window length; None means
    from the first event in the ledger to ``now``.

    JSON shape (every count an int; rates float or None when there is nothing to divide by)::

        {
          "window": {"start": float|None, "end": float, "days": float|None},
          "examined_events": int,            # events in the window: 0 means "nothing to say"
          "registered": int,
          "delivered_at_least_once": int,     # distinct crystal ids delivered in the window
          "delivered_registered": int|None,   # of those, still registered (None: ids not given)
          "deliveries": int,
          "deliveries_per_day": float|None,   # None when the window is under a day
          "top10": [{"crystal_id": str, "deliveries": int}, ...],   # busiest first
          "top10_share": float|None,         # their share of all deliveries, 0..1
          "median_fires": float|None,        # per crystal delivered at least once
          "never_fired": int,                # registered, not delivered in the window
          "never_fired_ids": [str]|None,     # sorted; None when only a count was given
          "oversize": int,
          "truncated_deliveries": int,
          "blocked_lookups": int,
          "marked_lookups": int,
          "followed_up": int,                # Reads of the full note a cut delivery pointed to:
                                             # the pointer worked (not a lookup, not a miss)
          "daily": [                         # per UTC day, oldest first, every day of the window
            {"day": "YYYY-MM-DD", "deliveries": int, "blocked": int, "marked": int}, ...
          ],                                 # (the newest DAILY_MAX days at most; [] when no events)
          "halves": [                        # the window split at its midpoint in time
            {"start": float, "end": float, "deliveries": int, "blocked": int, "marked": int,
             "lookups_per_1000": float|None, "blocked_per_1000": float|None,
             "blocked_share": float|None},   # blocked / (blocked + marked)
            {...}
          ] | [],                            # empty when the window is unknown (no events)
          "withheld_units": int,             # distinct (session, crystal) withheld in window
          "withheld_events": int,
          "unserved_calls": int,             # hook calls the binding index could not serve:
                                             # index_busy and index_building rows (nothing delivered)
          "spool_pending": int, "spool_rejected": int   # lines not (yet) in the ledger
        }
    """
    from geode.delivery import ledger

    now = time.time() if now is None else float(now)
    t = table_of(LedgerEvent)
    reg_ids = None if isinstance(registered, int) else sorted(set(registered))
    n_registered = registered if isinstance(registered, int) else len(reg_ids or [])
    n_oversize = oversize if isinstance(oversize, int) else len(set(oversize))

    def go(conn: Connection) -> Stats:
        start, end = _window(conn, days, now)
        in_window = [t.c.ts <= end, not_manual()] + ([t.c.ts >= start] if start is not None else [])
        if start is None:  # an empty ledger and no window asked for
            in_window = [t.c.id < 0]
        cond = and_(*in_window)
        # a skip set (one row per action: ``ledger.skipped_items``) counts as the rows it replaced
        is_set = and_(t.c.kind == "skipped_budget", t.c.crystal_id == "")
        examined = conn.execute(select(func.count()).select_from(t).where(cond, ~is_set)).scalar() or 0
        examined += sum(
            len(ledger.skipped_items("", "", str(detail or "")))
            for (detail,) in conn.execute(select(t.c.detail).where(cond, is_set))
        )
        per_crystal = conn.execute(
            select(t.c.crystal_id, func.count()).where(cond, t.c.kind == "delivered").group_by(t.c.crystal_id)
        ).all()
        counts = {str(cid): int(n) for cid, n in per_crystal}
        deliveries = sum(counts.values())
        busiest = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_N]
        truncated = (
            conn.execute(select(func.count()).where(cond, t.c.kind == "delivered", t.c.truncated != 0)).scalar() or 0
        )
        by_kind: dict[str, int] = dict(
            conn.execute(
                select(t.c.kind, func.count())
                .where(cond, t.c.kind.in_(LOOKUP_KINDS + ("withheld", FOLLOWED_UP) + UNSERVED_KINDS))
                .group_by(t.c.kind)
            ).all()
        )
        withheld_units = (
            conn.execute(
                select(func.count()).select_from(
                    select(t.c.session, t.c.crystal_id).where(cond, t.c.kind == "withheld").distinct().subquery()
                )
            ).scalar()
            or 0
        )

        halves: list[Half] = []
        if start is not None:
            mid = start + (end - start) / 2.0
            for lo, hi, last in ((start, mid, False), (mid, end, True)):
                upper = t.c.ts <= hi if last else t.c.ts < hi
                rows: dict[str, int] = dict(
                    conn.execute(
                        select(t.c.kind, func.count())
                        .where(t.c.ts >= lo, upper, not_manual(), t.c.kind.in_(("delivered",) + LOOKUP_KINDS))
                        .group_by(t.c.kind)
                    ).all()
                )
                d, b, m = int(rows.get("delivered", 0)), int(rows.get("blocked", 0)), int(rows.get("lookup_marked", 0))
                halves.append(
                    {
                        "start": lo,
                        "end": hi,
                        "deliveries": d,
                        "blocked": b,
                        "marked": m,
                        "lookups_per_1000": _per_1000(b + m, d),
                        "blocked_per_1000": _per_1000(b, d),
                        "blocked_share": _share(b, b + m),
                    }
                )

        window_days = (end - start) / DAY if start is not None else None
        delivered_ids = set(counts)
        if reg_ids is not None:
            never = sorted(set(reg_ids) - delivered_ids)
            delivered_registered: int | None = len(delivered_ids & set(reg_ids))
        else:
            never = None
            delivered_registered = None
        return {
            "window": {"start": start, "end": end, "days": round(window_days, 4) if window_days is not None else None},
            "examined_events": int(examined),
            "registered": int(n_registered),
            "delivered_at_least_once": len(delivered_ids),
            "delivered_registered": delivered_registered,
            "deliveries": deliveries,
            # a rate per day only over at least a day: three deliveries in ten seconds are not 25,920 a day
            "deliveries_per_day": round(deliveries / window_days, 2) if window_days and window_days >= 1 else None,
            "top10": [{"crystal_id": cid, "deliveries": n} for cid, n in busiest],
            "top10_share": _share(sum(n for _, n in busiest), deliveries),
            "median_fires": float(statistics.median(counts.values())) if counts else None,
            "never_fired": len(never) if never is not None else max(int(n_registered) - len(delivered_ids), 0),
            "never_fired_ids": never,
            "oversize": int(n_oversize),
            "truncated_deliveries": int(truncated),
            "blocked_lookups": int(by_kind.get("blocked", 0)),
            "marked_lookups": int(by_kind.get("lookup_marked", 0)),
            "followed_up": int(by_kind.get(FOLLOWED_UP, 0)),
            "daily": _daily(conn, cond, start, end),
            "halves": halves,
            "withheld_units": int(withheld_units),
            "withheld_events": int(by_kind.get("withheld", 0)),
            "unserved_calls": sum(int(by_kind.get(k, 0)) for k in UNSERVED_KINDS),
            "spool_pending": ledger.pending_count(settings),
            "spool_rejected": ledger.rejected_count(settings),
        }

    return with_connection(engine_or_conn, go)


def _fmt(value: float | str | None, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    if pct:
        return f"{100.0 * float(value):.1f}%"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _day(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(ts)) if ts is not None else "?"


def render_stats(d: Stats) -> str:
    """A plain-text table: what, count, window (the shape of the source's own table)."""
    w = d["window"]
    span = f"{_fmt(w['days'])} days, {_day(w['start'])} to {_day(w['end'])}" if w["start"] is not None else "no events"
    rows = [
        ("crystals registered", _fmt(d["registered"]), "now"),
        ("delivered at least once", _fmt(d["delivered_at_least_once"]), span),
        ("deliveries", _fmt(d["deliveries"]), span),
        (
            "deliveries per day",
            _fmt(d["deliveries_per_day"]) if d["deliveries_per_day"] is not None else "n/a",
            span if d["deliveries_per_day"] is not None else "needs a window of at least a day",
        ),
        ("busiest ten crystals' share", _fmt(d["top10_share"], pct=True), span),
        ("median fires per delivered crystal", _fmt(d["median_fires"]), span),
        ("never fired", _fmt(d["never_fired"]), span),
        ("oversize crystals", _fmt(d["oversize"]), "now"),
        ("truncated deliveries", _fmt(d["truncated_deliveries"]), span),
        ("blocked lookups", _fmt(d["blocked_lookups"]), span),
        ("marked lookups", _fmt(d["marked_lookups"]), span),
        ("follow-ups (full note read after a cut)", _fmt(d["followed_up"]), span),
    ]
    for label, h in zip(("first half", "second half"), d["halves"], strict=False):
        span_h = f"{_day(h['start'])} to {_day(h['end'])}"
        rows.append((f"lookups per 1,000 deliveries, {label}", _fmt(h["lookups_per_1000"]), span_h))
        rows.append((f"  blocked per 1,000 deliveries, {label}", _fmt(h["blocked_per_1000"]), span_h))
        rows.append((f"  blocked share of lookups, {label}", _fmt(h["blocked_share"], pct=True), span_h))
    rows.append(("withheld units (control arm)", _fmt(d["withheld_units"]), span))
    width = max(len(r[0]) for r in rows)
    cwidth = max(len(r[1]) for r in rows)
    out = [f"{'what':<{width}}  {'count':>{cwidth}}  window", "-" * (width + cwidth + 12)]
    out += [f"{a:<{width}}  {b:>{cwidth}}  {c}" for a, b, c in rows]
    if d["examined_events"] == 0:
        out.append("No ledger events in this window: these figures say nothing yet.")
    never = d.get("never_fired_ids")
    if never:
        out.append("")
        out.append("never fired: " + ", ".join(never))
    if d.get("unserved_calls"):
        out.append(f"{d['unserved_calls']} hook call(s) the binding index could not serve (busy or building).")
    if d.get("spool_pending"):
        out.append(f"{d['spool_pending']} event(s) still in the spool, not counted above.")
    if d.get("spool_rejected"):
        out.append(f"{d['spool_rejected']} unreadable spool line(s) in spool/rejected.jsonl, not counted above.")
    out.append("Deliveries count how often crystals showed up, not whether they helped; see `geode study`.")
    return "\n".join(out)
