"""The approval queue as the page reads it: pages of proposals grouped by night and agent, one
proposal with its evidence and diff, bulk previews and decisions, the history of actions.

Everything here reads the queue's own tables (``geode.queue.proposals``) and writes only
through the queue's API: ``apply.approve``, ``apply.undo``, ``queue_review.reject`` and, for a
refresh, ``proposals.file_proposal``. Why a page query of its own and not ``list_proposals``:
that one returns every matching row, and a queue of 5,000 proposals must paint its first page
without reading the other 4,950 (``LIMIT``/``OFFSET`` and ``GROUP BY`` counts in SQL).

This module holds the filter, the pages, the menus and the history; one proposal in depth is
``geode.web.queue_detail``, the decisions and the refresh ``geode.web.queue_decide``.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
from dataclasses import asdict, dataclass

from sqlalchemy import exists, func, select

from geode.kernel.errors import GeodeError
from geode.queue import proposals as Q
from geode.queue import tables as queue_tables

PER_PAGE = 50
MAX_PER_PAGE = 500


class QueueError(GeodeError, ValueError):
    """A request the queue cannot serve; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400, extra: dict | None = None):
        super().__init__(message)
        self.status = status
        self.extra = extra or {}


def who_of(settings, override: str | None = None) -> str:
    """Who decides: ``--who``, else ``[web] who`` in geode.toml, else the OS user."""
    if override:
        return override
    name = settings.web.who  # [web] who, checked by load_settings
    if isinstance(name, str) and name.strip():
        return name.strip()
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no user name in the environment or the password database
        return os.environ.get("USER") or "unknown"


# -- filters ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueFilter:
    """The queue's filters; every one given must hold (AND). ``path`` is a substring of any
    file the proposal touches; ``night`` is the run id (a night's upkeep run)."""

    agent: str | None = None
    kind: str | None = None
    domain: str | None = None
    status: str | None = None
    path: str | None = None
    night: str | None = None

    FIELDS = ("agent", "kind", "domain", "status", "path", "night")

    @classmethod
    def from_params(cls, params) -> QueueFilter:
        values = {}
        for name in cls.FIELDS:
            v = params.get(name)
            if v is None:
                continue
            if not isinstance(v, str):
                raise QueueError(f"filter {name!r} must be a string")
            v = v.strip()
            if v:
                values[name] = v
        if values.get("kind") and values["kind"] not in Q.KINDS:
            raise QueueError(f"kind {values['kind']!r}; expected one of {', '.join(Q.KINDS)}")
        if values.get("status") and values["status"] not in Q.STATUSES:
            raise QueueError(f"status {values['status']!r}; expected one of {', '.join(Q.STATUSES)}")
        return cls(**values)

    def as_params(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v}

    def empty(self) -> bool:
        return not self.as_params()

    def conditions(self) -> list:
        P, C = queue_tables.P, queue_tables.C
        out = []
        for col, value in (
            (P.c.agent, self.agent),
            (P.c.kind, self.kind),
            (P.c.domain, self.domain),
            (P.c.status, self.status),
            (P.c.run_id, self.night),
        ):
            if value:
                out.append(col == value)
        if self.path:
            pat = "%" + self.path.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_") + "%"
            out.append(exists(select(C.c.id).where(C.c.proposal_id == P.c.id, C.c.path.like(pat, escape="\\"))))
        return out


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def night_label(run_id: str, first_ts: float | None) -> str:
    """``night-2026-05-01`` reads "night of 2026-05-01"; any other run id keeps its name and date."""
    if run_id.startswith("night-"):
        return f"night of {run_id[len('night-') :]}"
    when = dt.datetime.fromtimestamp(first_ts).strftime("%Y-%m-%d %H:%M") if first_ts else ""
    return f"run {run_id}" + (f" ({when})" if when else "")


# -- a page of the queue ----------------------------------------------------------------------
def page_of(engine, flt: QueueFilter, page: int = 1, per_page: int = PER_PAGE) -> dict:
    """One page of proposals, newest night first, then agent, then id; with the totals of every
    (night, agent) group on the page (over the whole filter, not only this page)."""
    queue_tables.ensure_tables(engine)
    P, C = queue_tables.P, queue_tables.C
    per_page = max(1, min(int(per_page), MAX_PER_PAGE))
    conds = flt.conditions()
    runs = select(P.c.run_id.label("rid"), func.min(P.c.created_at).label("first")).group_by(P.c.run_id).subquery()
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(P).where(*conds)).scalar_one())
        pages = max(1, -(-total // per_page))
        page = max(1, min(int(page), pages))
        stmt = (
            select(P, runs.c.first)
            .join(runs, runs.c.rid == P.c.run_id)
            .where(*conds)
            .order_by(runs.c.first.desc(), P.c.run_id.desc(), P.c.agent, P.c.id)
            .limit(per_page)
            .offset((page - 1) * per_page)
        )
        rows = conn.execute(stmt).mappings().all()
        ids = [r["id"] for r in rows]
        paths: dict[int, list[str]] = {}
        if ids:
            for pid, path in conn.execute(
                select(C.c.proposal_id, C.c.path).where(C.c.proposal_id.in_(ids)).order_by(C.c.proposal_id, C.c.seq)
            ):
                paths.setdefault(pid, []).append(path)
        keys = sorted({(r["run_id"], r["agent"]) for r in rows})
        counts: dict[tuple, dict] = {}
        if keys:
            run_ids = sorted({k[0] for k in keys})
            q = (
                select(P.c.run_id, P.c.agent, P.c.status, func.count())
                .where(*conds, P.c.run_id.in_(run_ids))
                .group_by(P.c.run_id, P.c.agent, P.c.status)
            )
            for rid, agent, status, n in conn.execute(q):
                if (rid, agent) in keys:
                    counts.setdefault((rid, agent), {})[status] = int(n)
    groups: list[dict] = []
    for r in rows:
        key = (r["run_id"], r["agent"])
        if not groups or (groups[-1]["run_id"], groups[-1]["agent"]) != key:
            by_status = counts.get(key, {})
            groups.append(
                {
                    "run_id": r["run_id"],
                    "night": night_label(r["run_id"], r["first"]),
                    "agent": r["agent"],
                    "total": sum(by_status.values()),
                    "by_status": by_status,
                    "proposals": [],
                }
            )
        groups[-1]["proposals"].append(Q.summary(r, paths.get(r["id"], [])))
    return {
        "proposals": [p for g in groups for p in g["proposals"]],
        "groups": groups,
        "total": total,
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "filter": flt.as_params(),
    }


def choices(engine) -> dict:
    """What the filter menus offer: each agent, kind, domain, status and night with its count."""
    queue_tables.ensure_tables(engine)
    P = queue_tables.P
    out: dict = {}
    with engine.connect() as conn:
        for name, col in (("agent", P.c.agent), ("kind", P.c.kind), ("domain", P.c.domain), ("status", P.c.status)):
            out[name] = [
                {"value": v, "count": int(n)}
                for v, n in conn.execute(select(col, func.count()).group_by(col).order_by(col))
            ]
        nights = conn.execute(
            select(P.c.run_id, func.min(P.c.created_at), func.count())
            .group_by(P.c.run_id)
            .order_by(func.min(P.c.created_at).desc())
            .limit(60)
        ).all()
    out["night"] = [{"value": rid, "label": night_label(rid, first), "count": int(n)} for rid, first, n in nights]
    return out


# -- history ---------------------------------------------------------------------------------------
def history(
    engine, page: int = 1, per_page: int = PER_PAGE, proposal_id: int | None = None, who: str | None = None
) -> dict:
    """Every action on the queue (filed, approve, reject, undo, reconcile, refresh), newest first."""
    queue_tables.ensure_tables(engine)
    A_, P = queue_tables.A, queue_tables.P
    per_page = max(1, min(int(per_page), MAX_PER_PAGE))
    conds = []
    if proposal_id is not None:
        conds.append(A_.c.proposal_id == proposal_id)
    if who:
        conds.append(A_.c.who == who)
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(A_).where(*conds)).scalar_one())
        pages = max(1, -(-total // per_page))
        page = max(1, min(int(page), pages))
        rows = (
            conn.execute(
                select(A_, P.c.title, P.c.agent, P.c.kind)
                .join(P, P.c.id == A_.c.proposal_id)
                .where(*conds)
                .order_by(A_.c.id.desc())
                .limit(per_page)
                .offset((page - 1) * per_page)
            )
            .mappings()
            .all()
        )
    actions = [
        {
            "id": r["id"],
            "proposal_id": r["proposal_id"],
            "title": r["title"],
            "agent": r["agent"],
            "kind": r["kind"],
            "action": r["action"],
            "outcome": r["outcome"],
            "who": r["who"],
            "at": iso(r["at"]),
            "detail": _json(r["detail"]),
        }
        for r in rows
    ]
    return {"actions": actions, "total": total, "page": page, "pages": pages, "per_page": per_page}


def _json(text: str):
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def counts_by_status(engine) -> dict:
    queue_tables.ensure_tables(engine)
    with engine.connect() as conn:
        return {
            s: int(n)
            for s, n in conn.execute(select(queue_tables.P.c.status, func.count()).group_by(queue_tables.P.c.status))
        }


__all__ = ["QueueFilter", "QueueError", "page_of", "history", "who_of", "choices", "counts_by_status"]
