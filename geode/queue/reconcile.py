"""Settling the journal entries a crash (or a store that went away) left open: ``reconcile``,
which every ``geode proposals`` command and the page run first.

Apart from ``geode.queue.apply`` (the forward path) because it is the recovery path: it reads
the entries, asks whether each one's owner is alive (``geode.queue.journal_owner``), and
finishes or rolls back only those whose owner is gone, file by file from the states it finds.
"""

from __future__ import annotations

import json
from contextlib import ExitStack

from sqlalchemy.exc import SQLAlchemyError

from geode.queue import journal_owner, proposals, safepath
from geode.queue import tables as queue_tables
from geode.queue.atomic_put import FileConflict, file_state, put, remove_tmp
from geode.queue.journal_plan import content_of, log_unrecorded, remove_folders, remove_made_folders
from geode.queue.locks import queue_lock, store_lock, sweep_store_lock
from geode.queue.proposals import record


def reconcile(settings, engine, who: str = "reconcile") -> list[dict]:
    """Settle every journal entry left open by a crash; call it at start-up. One report each:
    ``{id, journal, op, outcome: finished | rolled_back | error, status, message,
    files: [{path, found: before | after | other | unsafe}]}`` (``found``: the file's state
    when reconcile looked, relative to the proposal)."""
    queue_tables.ensure_tables(engine)
    _P, _C, _A, J = queue_tables.TABLES
    reports = []
    with queue_lock(settings.home):
        with engine.connect() as conn:
            journals = conn.execute(J.select().where(J.c.state == "open").order_by(J.c.id)).mappings().all()
        for j in journals:
            try:
                owner = journal_owner.try_take(settings, engine, j["id"])
            except OSError as exc:
                reports.append(
                    dict(
                        _in_progress(engine, dict(j)),
                        outcome="error",
                        message=f"cannot take the journal's lock ({exc}); left for a later start",
                    )
                )
                continue
            if owner is None:  # its owner is alive (another process, another home): left to it
                reports.append(_in_progress(engine, dict(j)))
                continue
            try:
                with ExitStack() as stack:
                    report = _reconcile_one(settings, engine, j["id"], who, stack.enter_context)
            finally:
                owner.release()
            if report is not None:
                reports.append(report)
        for root in settings.domains.values():
            sweep_store_lock(root)
    return reports


def _in_progress(engine, j: dict) -> dict:
    """The report for an entry whose owner is alive: nothing done, nothing to do."""
    with engine.connect() as conn:
        row, _changes = proposals.load(conn, j["proposal_id"])
    return {
        "id": j["proposal_id"],
        "journal": j["id"],
        "op": j["op"],
        "outcome": "in_progress",
        "status": row["status"] if row is not None else "",
        "message": f"{j['op']} in progress (pid {j['pid']} on {j['host']}); left to it",
        "files": [],
    }


def _reconcile_one(settings, engine, jid: int, who: str, hold) -> dict | None:
    """Settle the open entry ``jid``, whose liveness lock the caller holds; None when it is no
    longer open once the store's lock is held (its owner finished it meanwhile)."""
    P, _C, _A, J = queue_tables.TABLES
    with engine.connect() as conn:
        j = conn.execute(J.select().where(J.c.id == jid)).mappings().one()
        row, changes = proposals.load(conn, j["proposal_id"])
    if j["state"] != "open":
        return None
    op = j["op"]
    plan = json.loads(j["plan"])
    names = {"from": "before", "to": "after"} if op == "apply" else {"from": "after", "to": "before"}
    report = {
        "id": j["proposal_id"],
        "journal": jid,
        "op": op,
        "outcome": "error",
        "status": row["status"],
        "message": "",
        "files": [],
    }
    name = settings.domains.get(row["domain"])
    if name is None:
        report["message"] = f"domain {row['domain']!r} is not configured here; left for a later start"
        return report
    try:
        root = hold(safepath.StoreRoot(name))  # opened once: every file below is reached from it
        hold(store_lock(name, at=root))
    except OSError as exc:
        report["message"] = f"cannot take the store lock ({exc}); left for a later start"
        return report
    with engine.connect() as conn:  # again, under the store's lock: read before, it may be done now
        if conn.execute(J.select().with_only_columns(J.c.state).where(J.c.id == jid)).scalar() != "open":
            return None
    content = content_of(changes, op)
    try:
        states = []
        for e in plan:
            remove_tmp(root, e["path"], e["tmp"])
            states.append(file_state(root, e["path"], e["from_sha"], e["to_sha"]))
        report["files"] = [{"path": e["path"], "found": names.get(s, s)} for e, s in zip(plan, states, strict=False)]
        unsafe = [e["path"] for e, s in zip(plan, states, strict=False) if s == "unsafe"]
        if unsafe:  # behind a symlink now: neither state can be proven, so nothing is closed
            raise safepath.UnsafePath(unsafe[0], f"cannot be reached without a symlink ({', '.join(unsafe)})")
        others = [e["path"] for e, s in zip(plan, states, strict=False) if s not in ("from", "to")]
        if j["direction"] == "forward" and not others:
            for e, s in zip(plan, states, strict=False):
                if s == "from":
                    put(root, e["path"], content[e["seq"]][1], e["to_mode"], e["from_sha"], e["tmp"])
            outcome = "finished"
            status = "applied" if op == "apply" else "undone"
            message = f"{op} interrupted; finished by reconcile"
        else:
            for e, s in reversed(list(zip(plan, states, strict=False))):
                if s == "to":
                    put(root, e["path"], content[e["seq"]][0], e["from_mode"], e["to_sha"], e["tmp"])
            outcome = "rolled_back"
            if op == "apply":
                status = "conflict" if others else j["prior_status"]
            else:
                status = j["prior_status"]
            message = f"{op} interrupted; rolled back by reconcile" + (
                f"; changed by someone else meanwhile: {', '.join(others)}" if others else ""
            )
        for e in plan:
            remove_tmp(root, e["path"], e["tmp"])
    except (FileConflict, safepath.UnsafePath, OSError) as exc:
        report["message"] = f"could not settle it now ({exc}); left for a later start"
        try:
            with engine.begin() as conn:
                record(conn, row["id"], "reconcile", "error", who, {"journal": jid, "error": str(exc)})
        except SQLAlchemyError as exc3:  # the report carries the message; the log says why the row is missing
            log_unrecorded(row["id"], "reconcile", exc3)
        return report
    with engine.begin() as conn:
        conn.execute(
            J.update()
            .where(J.c.id == jid)
            .values(state="done" if outcome == "finished" else "rolled_back", finished_at=proposals.now_ts())
        )
        # compare-and-set: the entry's claim is the condition (``set_status``); it holds while the
        # entry is open, and this reconcile holds the entry's liveness lock
        if not proposals.set_status(conn, row["id"], row["status"], status, message, jid, journal_id=None):
            raise proposals.ProposalError(
                f"proposal {row['id']}: its status changed under journal {jid}; see `geode proposals show`"
            )
        record(conn, row["id"], "reconcile", outcome, who, {"journal": jid, "op": op, "files": report["files"]})
    if op == "apply" and outcome == "rolled_back":
        remove_folders(root, plan)  # the folders this apply made for its new files
    elif op == "undo" and outcome == "finished":
        remove_made_folders(engine, root, row["id"])  # as a finished undo does
    report.update(outcome=outcome, status=status, message=message)
    return report
