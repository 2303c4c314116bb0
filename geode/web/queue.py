"""The approval queue as the page reads it: pages of proposals grouped by night and agent, one
proposal with its evidence and diff, bulk previews and decisions, the history of actions.

Everything here reads the queue's own tables (``geode.agents.proposals``) and writes only
through the queue's API: ``apply.approve``, ``apply.undo``, ``proposals.reject`` and, for a
refresh, ``proposals.file_proposal``. Why a page query of its own and not ``list_proposals``:
that one returns every matching row, and a queue of 5,000 proposals must paint its first page
without reading the other 4,950 (``LIMIT``/``OFFSET`` and ``GROUP BY`` counts in SQL).
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
from dataclasses import asdict, dataclass

from sqlalchemy import exists, func, select

from geode.agents import apply as A
from geode.agents import contract, safepath
from geode.agents import proposals as Q
from geode.delivery.errors import GeodeError
from geode.delivery.models import LedgerEvent
from geode.web import diffview

PER_PAGE = 50
MAX_PER_PAGE = 500
BULK_ACTIONS = ("approve", "reject", "undo")
#: Which statuses a bulk action takes from the current filter.
BULK_STATUSES = {"approve": ("pending",), "reject": Q.REJECTABLE, "undo": ("applied",)}
#: At most this many proposals are named one by one in a bulk preview (all are counted).
PREVIEW_NAMED = 500


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
    name = settings.web["who"]  # [web] who, checked by load_settings
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
        P, C = Q.P, Q.C
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
def _summary(row, paths: list[str]) -> dict:
    return {
        "id": row["id"],
        "agent": row["agent"],
        "kind": row["kind"],
        "domain": row["domain"],
        "title": row["title"],
        "status": row["status"],
        "paths": paths,
        "run_id": row["run_id"],
        "key": row["key"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "message": row["message"],
    }


def page_of(engine, flt: QueueFilter, page: int = 1, per_page: int = PER_PAGE) -> dict:
    """One page of proposals, newest night first, then agent, then id; with the totals of every
    (night, agent) group on the page (over the whole filter, not only this page)."""
    Q.ensure_tables(engine)
    P, C = Q.P, Q.C
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
        groups[-1]["proposals"].append(_summary(r, paths.get(r["id"], [])))
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
    Q.ensure_tables(engine)
    P = Q.P
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


# -- one proposal -----------------------------------------------------------------------------
def _findings(engine, ids: list[int]) -> dict[int, dict]:
    if not ids:
        return {}
    contract.ensure_tables(engine)
    _run, finding = contract.tables()
    with engine.connect() as conn:
        rows = conn.execute(select(finding).where(finding.c.id.in_(ids))).mappings().all()
    return {
        r["id"]: {
            "id": r["id"],
            "run_id": r["run_id"],
            "agent": r["agent"],
            "kind": r["kind"],
            "domain": r["domain"],
            "path": r["path"],
            "line": r["line"],
            "target": r["target"],
            "message": r["message"],
            "suggestion": r["suggestion"],
            "severity": r["severity"],
        }
        for r in rows
    }


def _ledger_rows(engine, ids: list[int]) -> dict[int, dict]:
    if not ids:
        return {}
    t = LedgerEvent.__table__
    with engine.connect() as conn:
        rows = conn.execute(select(t).where(t.c.id.in_(ids))).mappings().all()
    return {
        r["id"]: {
            "id": r["id"],
            "ts": iso(r["ts"]),
            "kind": r["kind"],
            "session": r["session"],
            "domain": r["domain"],
            "crystal_id": r["crystal_id"],
            "path": r["path"],
            "action": r["action"],
            "channel": r["channel"],
            "term": r["term"],
            "agent": r["agent"],
            "detail": r["detail"][:500],
        }
        for r in rows
    }


def note_address(domain: str, path: str) -> str | None:
    """The address a finding's or ledger row's file has in the store (``geode://domain/path``)."""
    if not domain or not path:
        return None
    return f"geode://{domain}/{path}"


def evidence_of(engine, items: list, default_domain: str) -> list[dict]:
    """Each evidence item with the finding or ledger row it cites (or ``missing``), linked to
    the note it is about."""
    fids = [int(e["finding"]) for e in items if isinstance(e, dict) and str(e.get("finding", "")).isdigit()]
    lids = [int(e["ledger_event"]) for e in items if isinstance(e, dict) and str(e.get("ledger_event", "")).isdigit()]
    findings, ledger = _findings(engine, fids), _ledger_rows(engine, lids)
    out = []
    for e in items:
        if not isinstance(e, dict):
            continue
        if "finding" in e:
            f = findings.get(int(e["finding"])) if str(e["finding"]).isdigit() else None
            out.append(
                {
                    "type": "finding",
                    "id": e["finding"],
                    "row": f,
                    "missing": f is None,
                    "address": note_address(f["domain"] or default_domain, f["path"]) if f else None,
                }
            )
        elif "ledger_event" in e:
            r = ledger.get(int(e["ledger_event"])) if str(e["ledger_event"]).isdigit() else None
            dom = (r["domain"] or (r["crystal_id"].split(":", 1)[0] if ":" in r["crystal_id"] else "")) if r else ""
            out.append(
                {
                    "type": "ledger_event",
                    "id": e["ledger_event"],
                    "row": r,
                    "missing": r is None,
                    "address": note_address(dom or default_domain, r["path"]) if r else None,
                }
            )
    return out


def detail(settings, engine, proposal_id: int) -> dict:
    """Everything about one proposal: the summary, rationale, evidence (resolved), the change
    list, the history of actions, the unified diff text, the diff as data (``files``) and what
    approving would do now (``check``: ``apply`` | ``conflict`` | ``failed``)."""
    p = Q.get(engine, proposal_id)
    if p is None:
        raise QueueError(f"no proposal {proposal_id}", 404)
    with engine.connect() as conn:
        row, changes = Q.load(conn, proposal_id)
    p["diff"] = Q.diff(engine, proposal_id)
    p["files"] = diffview.file_diffs(row["kind"], changes)
    p["evidence_resolved"] = evidence_of(engine, p["evidence"], settings.default_domain)
    p["check"] = check(settings, row, changes)
    p["night"] = night_label(row["run_id"], row["created_at"])
    return p


def check(settings, row, changes) -> dict:
    """What deciding would meet now, reading files only: ``would`` is ``apply`` (every file as
    the proposal expects), ``conflict`` (a file changed since; ``stale`` names them),
    ``failed`` (an unsafe path or an unknown domain), or for an applied proposal ``undo`` /
    ``changed-after-apply``."""
    root = settings.domains.get(row["domain"])
    if root is None:
        return {"would": "failed", "message": f"domain {row['domain']!r} is not configured here", "stale": []}
    undoing = row["status"] == "applied"
    stale, unsafe = [], []
    for c in changes:
        try:
            cur = safepath.read(root, c["path"])
        except (safepath.UnsafePath, OSError) as exc:
            unsafe.append(f"{c['path']}: {exc}")
            continue
        found = Q.sha256(cur[0]) if cur is not None else None
        if found != (c["after_sha"] if undoing else c["before_sha"]):
            stale.append(c["path"])
    if unsafe:
        return {"would": "failed", "message": "; ".join(unsafe), "stale": []}
    if undoing:
        return (
            {"would": "changed-after-apply", "message": "changed after the apply: " + ", ".join(stale), "stale": stale}
            if stale
            else {"would": "undo", "message": "undo would restore the files", "stale": []}
        )
    if stale:
        return {"would": "conflict", "message": "changed since proposed: " + ", ".join(stale), "stale": stale}
    return {"would": "apply", "message": "every file is as the proposal expects", "stale": []}


# -- decisions ----------------------------------------------------------------------------------
def decide(settings, engine, proposal_id: int, action: str, who: str, reason: str = "") -> dict:
    """Approve, reject or undo one proposal through the queue's API; its result dict."""
    try:
        if action == "approve":
            return A.approve(settings, engine, proposal_id, who)
        if action == "undo":
            return A.undo(settings, engine, proposal_id, who)
        if action == "reject":
            return Q.reject(settings, engine, proposal_id, who, reason)
    except Q.ProposalError as exc:
        raise QueueError(str(exc), 404 if str(exc).startswith("no proposal") else 400) from exc
    raise QueueError(f"action {action!r}; expected approve, reject or undo")


def bulk_targets(engine, action: str, flt: QueueFilter) -> list[dict]:
    """The proposals a bulk ``action`` would take under the filter, in the order it takes them
    (undo: newest first, so a later change is undone before the one it was made over)."""
    if action not in BULK_ACTIONS:
        raise QueueError(f"action {action!r}; expected one of {', '.join(BULK_ACTIONS)}")
    P = Q.P
    statuses = BULK_STATUSES[action]
    if flt.status:
        statuses = tuple(s for s in statuses if s == flt.status)
    if not statuses:
        return []
    order = P.c.id.desc() if action == "undo" else P.c.id
    with engine.connect() as conn:
        rows = (
            conn.execute(
                select(P.c.id, P.c.title, P.c.agent, P.c.kind, P.c.status, P.c.domain)
                .where(*flt.conditions(), P.c.status.in_(statuses))
                .order_by(order)
            )
            .mappings()
            .all()
        )
    return [dict(r) for r in rows]


def bulk_preview(settings, engine, action: str, flt: QueueFilter) -> dict:
    """How many and which proposals a bulk action would take, and (for approve and undo) what
    each would meet on disk now. Reads only."""
    targets = bulk_targets(engine, action, flt)
    named = []
    tally: dict[str, int] = {}
    for t in targets[:PREVIEW_NAMED]:
        if action == "reject":
            would = "reject"
        else:
            with engine.connect() as conn:
                row, changes = Q.load(conn, t["id"])
            would = check(settings, row, changes)["would"]
        tally[would] = tally.get(would, 0) + 1
        named.append(dict(t, would=would))
    return {
        "action": action,
        "filter": flt.as_params(),
        "count": len(targets),
        "ids": [t["id"] for t in targets],
        "named": named,
        "checked": len(named),
        "would": tally,
    }


def bulk_decide(settings, engine, action: str, flt: QueueFilter, ids: list[int], who: str, reason: str = "") -> dict:
    """Act on exactly the proposals the preview showed: the targets are computed again from the
    filter and must be the same ids (else 409 with the new preview: nothing is done that the
    person did not see)."""
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise QueueError("ids must be the list of proposal ids the preview showed")
    if flt.empty():
        raise QueueError("a bulk action needs at least one filter (agent, kind, domain, status, path or night)")
    targets = [t["id"] for t in bulk_targets(engine, action, flt)]
    if sorted(targets) != sorted(ids):
        raise QueueError(
            "the queue changed since the preview; look at the new preview and confirm again",
            409,
            {"preview": bulk_preview(settings, engine, action, flt)},
        )
    results = [decide(settings, engine, i, action, who, reason) for i in targets]
    return {
        "action": action,
        "filter": flt.as_params(),
        "results": results,
        "ok": sum(1 for r in results if r["ok"]),
        "not_done": sum(1 for r in results if not r["ok"]),
    }


# -- refresh a conflicted proposal ---------------------------------------------------------------
def _merge(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """Three-way merge of lines (the ``merge3`` library): the proposal's change (base ->
    theirs) made over the file as it is now (ours); None when the two touch the same lines."""
    import merge3

    m = merge3.Merge3(base.splitlines(keepends=True), ours.splitlines(keepends=True), theirs.splitlines(keepends=True))
    out = []
    for region in m.merge_regions():
        kind = region[0]
        if kind == "conflict":
            return None
        if kind == "unchanged":
            out.extend(m.base[region[1] : region[2]])
        elif kind in ("a", "same"):
            out.extend(m.a[region[1] : region[2]])
        elif kind == "b":
            out.extend(m.b[region[1] : region[2]])
    return b"".join(out)


def refresh(settings, engine, proposal_id: int, who: str) -> dict:
    """Make a conflicted proposal again over the files as they are now: each edit is merged
    three ways (what the agent saw, what the file holds now, what the agent proposed); when the
    two changes touch different lines, a new proposal is filed (same agent, kind, evidence and
    rationale, noting where it came from) and the old one is rejected as superseded. Files are
    not touched; the new proposal waits for a decision like any other."""
    with engine.connect() as conn:
        row, changes = Q.load(conn, proposal_id)
    if row is None:
        raise QueueError(f"no proposal {proposal_id}", 404)
    if row["status"] not in ("pending", "conflict", "failed"):
        raise QueueError(f"proposal {proposal_id} is {row['status']}; only a pending or conflicted one is refreshed")
    state = check(settings, row, changes)
    if state["would"] == "apply":
        raise QueueError(f"proposal {proposal_id} is not stale: every file is as it expects; approve it as it is")
    if state["would"] == "failed":
        raise QueueError(f"proposal {proposal_id} cannot be refreshed: {state['message']}")
    root = settings.domains[row["domain"]]

    def now(path: str) -> bytes | None:
        cur = safepath.read(root, path)
        return cur[0] if cur is not None else None

    creates = [c for c in changes if c["before_sha"] is None]
    removes = [c for c in changes if c["after_sha"] is None]
    pair = row["kind"] in ("move", "archive") and len(creates) == 1 and len(removes) == 1
    new: list[Q.FileChange] = []
    problems: list[str] = []
    for c in changes:
        before, after = Q._b(c["before"]), Q._b(c["after"])
        cur = now(c["path"])
        if c["before_sha"] is None:  # a file it creates
            if cur is not None:
                problems.append(f"{c['path']} exists now")
                continue
            if pair:
                src = removes[0]
                src_now = now(src["path"])
                if src_now is None:
                    problems.append(f"{src['path']} (the file it moves) is gone")
                    continue
                merged = _merge(Q._b(src["before"]) or b"", src_now, after or b"")
                if merged is None:
                    problems.append(f"{src['path']}: changed on the same lines the move rewrites")
                    continue
                after = merged
            new.append(Q.FileChange(c["path"], None, after, c["mode"]))
        elif c["after_sha"] is None:  # a file it removes
            if cur is None:
                problems.append(f"{c['path']} is gone")
                continue
            new.append(Q.FileChange(c["path"], Q.sha256(cur), None))
        else:
            if cur is None:
                problems.append(f"{c['path']} is gone")
                continue
            merged = _merge(before or b"", cur, after or b"")
            if merged is None:
                problems.append(f"{c['path']}: changed on the same lines the proposal changes")
                continue
            new.append(Q.FileChange(c["path"], Q.sha256(cur), merged, c["mode"]))
    if problems:
        raise QueueError(f"proposal {proposal_id} cannot be refreshed: " + "; ".join(problems), 409)
    A_ = Q.A
    with engine.connect() as conn:
        n = int(
            conn.execute(
                select(func.count()).select_from(A_).where(A_.c.proposal_id == proposal_id, A_.c.action == "refresh")
            ).scalar_one()
        )
    draft = Q.ProposalDraft(
        agent=row["agent"],
        kind=row["kind"],
        domain=row["domain"],
        title=row["title"],
        rationale=(row["rationale"] or "")
        + f"\n\n(Refreshed from proposal #{proposal_id} over the files as they are now.)",
        evidence=json.loads(row["evidence"] or "[]"),
        changes=new,
        run_id=row["run_id"],
        key=(row["key"][:200] + f"~refresh-{proposal_id}-{n + 1}"),
    )
    try:
        new_id = Q.file_proposal(settings, engine, draft)
    except Q.ProposalError as exc:
        raise QueueError(f"proposal {proposal_id} cannot be refreshed: {exc}", 409) from exc
    if new_id is None:
        raise QueueError(f"proposal {proposal_id} was refreshed already", 409)
    with engine.begin() as conn:
        Q.record(conn, proposal_id, "refresh", "refreshed", who, {"new": new_id})
        Q.record(conn, new_id, "refresh", "filed", who, {"from": proposal_id})
    rej = Q.reject(settings, engine, proposal_id, who, f"superseded by refreshed proposal #{new_id}")
    return {
        "id": proposal_id,
        "action": "refresh",
        "ok": True,
        "new_id": new_id,
        "status": rej["status"],
        "message": f"refreshed as proposal #{new_id}",
        "files": [{"path": c.path} for c in new],
    }


# -- history ---------------------------------------------------------------------------------------
def history(
    engine, page: int = 1, per_page: int = PER_PAGE, proposal_id: int | None = None, who: str | None = None
) -> dict:
    """Every action on the queue (filed, approve, reject, undo, reconcile, refresh), newest first."""
    Q.ensure_tables(engine)
    A_, P = Q.A, Q.P
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
    Q.ensure_tables(engine)
    with engine.connect() as conn:
        return {s: int(n) for s, n in conn.execute(select(Q.P.c.status, func.count()).group_by(Q.P.c.status))}


__all__ = [
    "QueueFilter",
    "QueueError",
    "page_of",
    "detail",
    "decide",
    "bulk_preview",
    "bulk_decide",
    "refresh",
    "history",
    "who_of",
    "choices",
    "counts_by_status",
]
