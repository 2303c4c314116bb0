"""Deciding from the page: approve, reject or undo one proposal or a filtered set (with its
preview first), and refresh a conflicted proposal against the files as they are now.

Apart from reading the queue (``geode.web.queue``, ``geode.web.queue_detail``) because these
write, and only through the queue's API: ``apply.approve``, ``apply.undo``,
``queue_review.reject`` and, for a refresh, ``proposals.file_proposal``.
"""

from __future__ import annotations

import json

from sqlalchemy import func, select

from geode.queue import apply as A
from geode.queue import proposals as Q
from geode.queue import review as queue_review
from geode.queue import safepath
from geode.queue import tables as queue_tables
from geode.web.queue import QueueError, QueueFilter
from geode.web.queue_detail import check

BULK_ACTIONS = ("approve", "reject", "undo")
#: Which statuses a bulk action takes from the current filter.
BULK_STATUSES = {"approve": ("pending",), "reject": Q.REJECTABLE, "undo": ("applied",)}
#: At most this many proposals are named one by one in a bulk preview (all are counted).
PREVIEW_NAMED = 500


# -- decisions ----------------------------------------------------------------------------------
def decide(settings, engine, proposal_id: int, action: str, who: str, reason: str = "") -> dict:
    """Approve, reject or undo one proposal through the queue's API; its result dict."""
    try:
        if action == "approve":
            return A.approve(settings, engine, proposal_id, who)
        if action == "undo":
            return A.undo(settings, engine, proposal_id, who)
        if action == "reject":
            return queue_review.reject(settings, engine, proposal_id, who, reason)
    except Q.ProposalError as exc:
        raise QueueError(str(exc), 404 if str(exc).startswith("no proposal") else 400) from exc
    raise QueueError(f"action {action!r}; expected approve, reject or undo")


def bulk_targets(engine, action: str, flt: QueueFilter) -> list[dict]:
    """The proposals a bulk ``action`` would take under the filter, in the order it takes them
    (undo: newest first, so a later change is undone before the one it was made over)."""
    if action not in BULK_ACTIONS:
        raise QueueError(f"action {action!r}; expected one of {', '.join(BULK_ACTIONS)}")
    P = queue_tables.P
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
    out: list[bytes] = []
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
        before, after = Q.stored_bytes(c["before"]), Q.stored_bytes(c["after"])
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
                merged = _merge(Q.stored_bytes(src["before"]) or b"", src_now, after or b"")
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
    A_ = queue_tables.A
    with engine.connect() as conn:
        facts = Q.read_facts(conn, proposal_id)  # a refresh rests on what the original rested on
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
        facts=facts,
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
    rej = queue_review.reject(settings, engine, proposal_id, who, f"superseded by refreshed proposal #{new_id}")
    return {
        "id": proposal_id,
        "action": "refresh",
        "ok": True,
        "new_id": new_id,
        "status": rej["status"],
        "message": f"refreshed as proposal #{new_id}",
        "files": [{"path": c.path} for c in new],
    }
