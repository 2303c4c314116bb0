"""Applying and undoing proposals: atomic per file, consistent per proposal, recoverable.

Per file (``geode.queue.atomic_put.put``): a temporary file in the target's own folder, every
byte written and ``fsync``-ed, the target's sha256 checked again, ``os.replace``, ``fsync`` of
the folder; a removal is a checked ``unlink``.

Per proposal, through the intent journal (``proposal_journal``):

1. check every file's sha256 against what the proposal expects (``before_sha`` to apply,
   ``after_sha`` to undo); any difference is a conflict and nothing is touched;
2. commit the journal entry (the plan: each path with its from/to hashes and modes, the temp
   names) and claim the proposal (``journal_id``) in one transaction;
3. put each file, in order (a move: the new file, the link rewrites, the removal last);
4. commit: journal ``done``, status ``applied`` (or ``undone``), an action row.

An error in step 3 (a changed file, a refused path, EIO or ENOSPC) turns the journal's
``direction`` to ``back`` and puts the files already done back as they were; the status stays
what it was (``pending``), or becomes ``conflict``/``failed``. A crash anywhere leaves every
file either as it was or as proposed (each replace is atomic) and the journal open;
``reconcile`` at the next start finds it, removes the temp files, and finishes the operation
when it was going forward and every file is in one of its two states, or rolls it back
otherwise. It reports, per file, which state it found.

Apply, undo and reconcile hold one ``flock`` (``GEODE_HOME/locks/queue.lock``). That made an
open journal a dead process's only while each home had its own records; with one records
database shared by homes, every journal entry has an owner holding a liveness lock on it for its
life (``geode.queue.journal_owner``: a PostgreSQL advisory lock, or a lock file beside a SQLite
database), and ``reconcile`` settles only entries whose owner is gone. An abort closes an entry
as rolled back only when every file it replaced is provably back; a store it cannot reach keeps
it open for ``reconcile``. Inside the queue lock they hold the store's lock (``<store>/.geode-store.lock``), so two homes
that apply to one store take turns, and every temporary file's name carries the home, the pid
and a random token (``tmp_name``): one home never renames another's temp file over its target.

Two homes deciding the same proposal (issue 22, point 1): every status change is a
compare-and-set from the status the actor read (``proposals.set_status``), and the proposal is
read again once the store's lock is held; the loser reports the winner's outcome
(``proposals.winner``) and writes nothing over it.

One store, one identity (issue 22, point 2): the store is opened once (``safepath.StoreRoot``, a
directory descriptor) and every file is reached from it, so a folder put at the store's path
mid-apply (an unmount, a restore) is never written into; the path is checked to still name that
folder before each file and after the last (one ``stat``), and when it does not the operation
is rolled back in the store folder itself and says so.

Known gap (a writer that ignores the store lock): between the last sha256 check and ``os.replace`` a writer that
does not cooperate can still change the file, and that write is lost. The window is one
``replace`` call; closing it needs ``renameat2(RENAME_EXCHANGE)``, which Python does not expose.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import ExitStack

from sqlalchemy.exc import SQLAlchemyError

from geode.kernel import team_rules
from geode.kernel.errors import StoreError
from geode.queue import atomic_put, journal_owner, proposals, safepath
from geode.queue import review as queue_review
from geode.queue import tables as queue_tables
from geode.queue.atomic_put import FileConflict, default_mode, file_state, put, remove_tmp
from geode.queue.journal_plan import (
    content_of,
    files_of,
    log_unrecorded,
    missing_folders,
    remove_folders,
    remove_made_folders,
)
from geode.queue.locks import STORE_LOCK, queue_lock, store_lock, tmp_name
from geode.queue.proposals import ProposalError, record, result, sha256
from geode.queue.reconcile import reconcile

#: what callers (the command line, the page, the tests) reach through this module
__all__ = [
    "STORE_LOCK",
    "approve",
    "approve_many",
    "before_file",
    "queue_lock",
    "reconcile",
    "store_lock",
    "tmp_name",
    "undo",
]


def execute(settings, engine, proposal_id: int, who: str, op: str) -> dict:
    """Apply (``op="apply"``) or undo (``op="undo"``) one proposal; the result dict."""
    action = "approve" if op == "apply" else "undo"
    try:
        lock = queue_lock(settings.home)
        lock.__enter__()
    except OSError as exc:
        message = f"I/O error, nothing changed: cannot take the queue lock: {exc}"
        with engine.begin() as conn:
            row, _changes = proposals.load(conn, proposal_id)
            if row is None:
                raise ProposalError(f"no proposal {proposal_id}") from None
            record(conn, proposal_id, action, "error", who, {"message": message})
        return result(proposal_id, action, False, row["status"], message, [])
    try:
        with ExitStack() as stack:
            return _execute(settings, engine, proposal_id, who, op, stack.enter_context)
    finally:
        lock.__exit__(None, None, None)


def _execute(settings, engine, proposal_id: int, who: str, op: str, hold) -> dict:
    """``hold(cm)`` enters a context manager until the operation is over (the store's lock)."""
    P, C, _A, J = queue_tables.TABLES
    action = "approve" if op == "apply" else "undo"
    reconcile(settings, engine, who)  # an interrupted operation is settled first
    with engine.connect() as conn:
        row, changes = proposals.load(conn, proposal_id)
    if row is None:
        raise ProposalError(f"no proposal {proposal_id}")
    files = files_of(changes)
    prior = row["status"]
    verb = "applied" if op == "apply" else "undone"

    def lost(conn) -> dict:
        """Another actor changed the status since it was read: report its outcome, write none."""
        status, why = proposals.winner(conn, proposal_id)
        message = f"not {verb} by this home: {why}"
        record(conn, proposal_id, action, "refused", who, {"message": message, "seen": prior})
        return result(proposal_id, action, False, status, message, files)

    def settle(ok: bool, outcome: str, message: str, status: str | None = None, detail=None) -> dict:
        """Record the outcome; a status change is a compare-and-set from ``prior`` (an actor that
        lost the race to another home reports the winner's outcome instead)."""
        with engine.begin() as conn:
            if status is not None and status != prior:
                if not proposals.set_status(conn, proposal_id, prior, status, message):
                    return lost(conn)
            else:
                now = conn.execute(P.select().with_only_columns(P.c.status).where(P.c.id == proposal_id)).first()
                if now is None or now.status != prior:
                    return lost(conn)
            record(conn, proposal_id, action, outcome, who, dict(detail or {}, message=message))
        return result(proposal_id, action, ok, status or prior, message, files)

    allowed = proposals.APPROVABLE if op == "apply" else ("applied",)
    if prior not in allowed:
        why = f"it is {prior}" if op == "apply" or prior != "undone" else "it is already undone"
        return settle(False, "refused", f"not {verb}: {why}")
    name = settings.domains.get(row["domain"])
    if name is None:
        return settle(
            False, "failed", f"domain {row['domain']!r} is not configured here", "failed" if op == "apply" else None
        )
    refusal = team_rules.write_refusal(settings, row["domain"]) if op == "apply" else None
    if refusal is not None:  # a derived folder: what is written there the next sync takes back
        return settle(False, "refused", f"not applied: {refusal}", "failed")  # an undo may take a write back
    try:
        # the store, opened once: every file below is reached from this folder, never by its path
        # again (a folder swapped in at the path mid-apply is never written into)
        root = hold(safepath.StoreRoot(name))
        hold(store_lock(name, at=root))  # held until the result: the checks below see what is put
    except OSError as exc:
        return settle(False, "error", f"I/O error, nothing changed: cannot take the store lock: {exc}")
    with engine.connect() as conn:  # again, under the store's lock: another home may have decided
        row, changes = proposals.load(conn, proposal_id)
    if row is None:
        raise ProposalError(f"no proposal {proposal_id}")
    if row["status"] != prior:
        with engine.begin() as conn:
            return lost(conn)

    ordered = list(changes) if op == "apply" else list(reversed(changes))
    plan, stale, unsafe = [], [], []
    for c in ordered:
        from_sha, to_sha = (c["before_sha"], c["after_sha"]) if op == "apply" else (c["after_sha"], c["before_sha"])
        try:
            cur = safepath.read(root, c["path"])
        except safepath.UnsafePath as exc:
            unsafe.append(str(exc))
            continue
        except OSError as exc:
            return settle(False, "error", f"{c['path']}: cannot read: {exc}")
        if (sha256(cur[0]) if cur is not None else None) != from_sha:
            stale.append(c["path"])
            continue
        from_mode = cur[1] if cur is not None else None
        if to_sha is None:
            to_mode = None
        elif op == "apply":
            to_mode = c["mode"] if c["mode"] is not None else (from_mode if from_mode is not None else default_mode())
        else:
            to_mode = c["before_mode"] if c["before_mode"] is not None else default_mode()
        plan.append(
            {
                "seq": c["seq"],
                "path": c["path"],
                "from_sha": from_sha,
                "to_sha": to_sha,
                "from_mode": from_mode,
                "to_mode": to_mode,
                "tmp": "",
                # the folders this apply makes for a new file (an archive's), so its undo removes
                # them again once they are empty
                "made": missing_folders(root, c["path"]) if op == "apply" and from_sha is None else [],
            }
        )
    if unsafe:
        return settle(False, "failed", "refused path: " + "; ".join(unsafe), "failed" if op == "apply" else None)
    if stale:
        if op == "apply":
            return settle(
                False,
                "conflict",
                "changed since proposed (sha256 differs): " + ", ".join(stale),
                "conflict",
                {"paths": stale},
            )
        return settle(
            False,
            "refused",
            "changed after the apply (sha256 differs from after): " + ", ".join(stale),
            None,
            {"paths": stale},
        )

    # The intent, and the claim, in one transaction; the liveness lock on the entry is taken
    # inside it, so no reconcile (of this home or another sharing the records) ever sees the
    # entry open without its owner holding that lock (``journal_owner``).
    now = proposals.now_ts()
    conn = engine.connect()
    held: list[journal_owner.Ownership] = []
    try:
        with conn.begin():
            _write_intent(settings, engine, conn, proposal_id, op, prior, who, now, plan, action, held)
    except OSError as exc:  # the journal's lock file could not be made: nothing was committed
        for owner in held:
            owner.release()
        conn.close()
        return settle(False, "error", f"I/O error, nothing changed: cannot take the journal's lock: {exc}")
    except _Lost:  # another actor changed the status since it was read: nothing was committed
        for owner in held:
            owner.release()
        conn.close()
        with engine.begin() as wconn:
            return lost(wconn)
    except BaseException:  # clean up, then re-raise: nothing is caught here
        for owner in held:
            owner.release()
        conn.close()
        raise
    if engine.dialect.name != "postgresql":
        conn.close()  # the SQLite owner holds a lock file, not the connection
    (owner,) = held
    try:
        return _carry_out(settings, engine, row, op, owner.jid, plan, changes, who, files, root)
    finally:
        owner.release()  # done, rolled back, or given up: a reconcile may settle it now


def _write_intent(settings, engine, conn, proposal_id, op, prior, who, now, plan, action, held: list) -> None:
    """Insert the journal entry (the plan), take its liveness lock (appended to ``held``, so
    the caller releases it whatever happens next) and claim the proposal, on ``conn`` inside the
    caller's transaction."""
    P, C, _A, J = queue_tables.TABLES
    jid = conn.execute(
        J.insert()
        .values(
            proposal_id=proposal_id,
            op=op,
            direction="forward",
            state="open",
            prior_status=prior,
            who=who,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=now,
            finished_at=None,
            plan="[]",
        )
        .returning(J.c.id)
    ).scalar_one()
    held.append(journal_owner.own(settings, engine, conn, jid))
    for e in plan:
        e["tmp"] = tmp_name(settings.home, jid, e["seq"])
    conn.execute(J.update().where(J.c.id == jid).values(plan=json.dumps(plan)))
    claimed = conn.execute(
        P.update().where(P.c.id == proposal_id, P.c.status == prior, P.c.journal_id.is_(None)).values(journal_id=jid)
    )
    if claimed.rowcount != 1:  # another actor changed it since it was read: nothing is committed
        raise _Lost(f"proposal {proposal_id} changed while being {action}d")
    if op == "apply":
        for e in plan:
            conn.execute(
                C.update().where(C.c.proposal_id == proposal_id, C.c.seq == e["seq"]).values(before_mode=e["from_mode"])
            )


def _carry_out(settings, engine, row, op, jid, plan, changes, who, files, root) -> dict:
    """Steps 3 and 4: put each file, then mark the journal done (or abort and put them back)."""
    P, _C, _A, J = queue_tables.TABLES
    proposal_id = row["id"]
    action = "approve" if op == "apply" else "undo"
    atomic_put.after_step("journal_intent", "")

    content = content_of(changes, op)
    started: list[dict] = []
    try:
        for i, e in enumerate(plan):
            before_file(i, len(plan))
            _same_store(root, op)  # one stat a file: stop as soon as the path names another folder
            started.append(e)  # it may be replaced even if a later step (the folder fsync) fails
            put(root, e["path"], content[e["seq"]][1], e["to_mode"], e["from_sha"], e["tmp"])
        _same_store(root, op)  # after: every file was put in the folder the path still names
    except (FileConflict, safepath.UnsafePath, OSError) as exc:
        return _abort(settings, engine, row, op, jid, plan, started, content, exc, who, files, root)

    new_status = "applied" if op == "apply" else "undone"
    with engine.begin() as conn:
        marked = conn.execute(
            J.update().where(J.c.id == jid, J.c.state == "open").values(state="done", finished_at=proposals.now_ts())
        )
        if marked.rowcount != 1:  # settled by a reconcile meanwhile: its outcome stands, not ours
            raise ProposalError(
                f"proposal {proposal_id}: journal {jid} was settled by another process during the {op}; "
                "see `geode proposals show`"
            )
        if not proposals.set_status(conn, proposal_id, row["status"], new_status, "", jid, journal_id=None):
            raise ProposalError(  # the claim makes this unreachable; the transaction is not committed
                f"proposal {proposal_id}: its status changed under journal {jid}; see `geode proposals show`"
            )
        record(conn, proposal_id, action, new_status, who, {"journal": jid})
    atomic_put.after_step("journal_mark", "")
    if op == "undo":
        remove_made_folders(engine, root, proposal_id)
    return result(proposal_id, action, True, new_status, new_status, files)


def before_file(i: int, n: int) -> None:
    """Called before the ``i``-th of ``n`` files is put; does nothing. The seam the fault tests
    replace (this module's attribute, looked up at each call) to act at a known point of an
    apply: move the store away, swap a folder for a symlink, kill it, let another home look at it.
    In the test's own process by ``monkeypatch``; in a real ``geode`` process by starting it
    through ``tests/apply_seam.py``, which sets a pause or a gate here and then runs the
    program. Nothing in the product reads a switch for it (no environment variable)."""


class _NotBack(StoreError):
    """Raised inside ``_abort`` when a file it replaced is not back (or cannot be seen)."""


class _Lost(ProposalError):
    """Another actor changed the proposal's status between our read and our claim."""


class StoreSwapped(safepath.StoreUnavailable):
    """The store path no longer names the folder the operation opened (it was moved away, or
    another folder was put at its path): the operation cannot finish against the same folder."""


def _same_store(root: safepath.StoreRoot, op: str) -> None:
    if not root.same():
        raise StoreSwapped(f"the store folder {root.path} was moved away or replaced by another folder during the {op}")


def _abort(settings, engine, row, op, jid, plan, started, content, exc, who, files, root) -> dict:
    """Put back, in reverse order, the files already replaced; record why.

    Every file is put back in the folder the operation opened (``root``, a ``StoreRoot``),
    wherever that folder is now: a store renamed away, or with another folder put at its path,
    is rolled back in itself and nothing is written into the other folder. The journal is
    closed as rolled back only when every file this operation replaced is provably back (no
    file still in its new state or behind a symlink). Otherwise (a folder swapped for a symlink,
    a disk that fails again) the entry stays open, going back, the proposal stays claimed, and
    ``reconcile`` finishes the rollback once the store is reachable again."""
    P, _C, _A, J = queue_tables.TABLES
    action = "approve" if op == "apply" else "undo"
    prior = row["status"]
    if isinstance(exc, StoreSwapped) or not root.same():
        outcome, status = "error", prior
        message = (
            f"I/O error: the store folder {root.path} went away (moved, or another folder put at its path) "
            f"during the {op}; rolled back in the store folder itself (now at {root.where()}), "
            "nothing written anywhere else"
        )
    elif isinstance(exc, FileConflict):
        outcome, status = ("conflict", "conflict") if op == "apply" else ("refused", prior)
        message = f"changed since proposed: {exc}" if op == "apply" else f"changed after the apply: {exc}"
    elif isinstance(exc, safepath.UnsafePath):
        outcome, status = "failed", ("failed" if op == "apply" else prior)
        message = f"refused path: {exc}"
    else:
        outcome, status = "error", prior
        message = f"I/O error, nothing changed: {exc}"
    try:
        with engine.begin() as conn:
            conn.execute(J.update().where(J.c.id == jid).values(direction="back"))
        done = []
        for e in reversed(started):
            state = file_state(root, e["path"], e["from_sha"], e["to_sha"])
            if state == "to":
                put(root, e["path"], content[e["seq"]][0], e["from_mode"], e["to_sha"], e["tmp"])
                done.append(e)
        # every file is back, seen again in the folder the operation started on (its descriptor)
        not_back = [
            e["path"] for e in started if file_state(root, e["path"], e["from_sha"], e["to_sha"]) in ("to", "unsafe")
        ]
        if not_back:
            raise _NotBack(f"not back: {', '.join(not_back)}")
        for e in plan:
            remove_tmp(root, e["path"], e["tmp"])
        with engine.begin() as conn:
            conn.execute(J.update().where(J.c.id == jid).values(state="rolled_back", finished_at=proposals.now_ts()))
            if not proposals.set_status(conn, row["id"], prior, status, message, jid, journal_id=None):
                raise _NotBack(f"its status changed under journal {jid}")  # unreachable while claimed
            record(
                conn,
                row["id"],
                action,
                outcome,
                who,
                {"journal": jid, "error": str(exc), "rolled_back": [e["path"] for e in done]},
            )
        if op == "apply":
            remove_folders(root, plan)
    except (FileConflict, safepath.UnsafePath, _NotBack, OSError, SQLAlchemyError) as exc2:
        # the journal stays open (direction back): reconcile finishes it
        cause = message.replace("I/O error, nothing changed: ", "I/O error: ")
        message = (
            f"{cause}; not rolled back yet ({exc2}); the journal stays open and "
            "`geode proposals reconcile` puts the files back once the store is reachable"
        )
        try:
            with engine.begin() as conn:
                conn.execute(
                    P.update()
                    .where(P.c.id == row["id"], P.c.journal_id == jid)
                    .values(message=message, updated_at=proposals.now_ts())
                )
                record(
                    conn, row["id"], action, "error", who, {"journal": jid, "error": str(exc), "rollback": str(exc2)}
                )
        except SQLAlchemyError as exc3:  # the result carries the message; the log says why the row is missing
            log_unrecorded(row["id"], action, exc3)
        return result(row["id"], action, False, prior, message, files)
    return result(row["id"], action, False, status, message, files)


# -- the entry points ------------------------------------------------------------------------
def approve(settings, engine, proposal_id: int, who: str) -> dict:
    """Apply a proposal (atomically, after re-checking every file's sha256). The result:
    ``{id, action: "approve", ok, status, message, files: [{path, op}]}``; a conflict sets the
    status ``conflict``; an I/O error leaves it as it was (``pending``) with ``ok`` false."""
    queue_tables.ensure_tables(engine)
    return execute(settings, engine, proposal_id, who, "apply")


def undo(settings, engine, proposal_id: int, who: str) -> dict:
    """Restore the exact bytes and mode every file had before the apply; refused (status stays
    ``applied``) when any file changed after the apply."""
    queue_tables.ensure_tables(engine)
    return execute(settings, engine, proposal_id, who, "undo")


def approve_many(
    settings,
    engine,
    who: str,
    *,
    agent: str | None = None,
    kind: str | None = None,
    domain: str | None = None,
    dry_run: bool = False,
) -> list[dict]:
    """Approve every pending proposal of ``agent`` and/or ``kind`` (and ``domain``), oldest
    first. With ``dry_run`` nothing is written anywhere (no file, no row): each result says
    what approving would do now (``would``: ``apply`` | ``conflict`` | ``failed``)."""
    if agent is None and kind is None:
        raise ProposalError("bulk approval needs --agent and/or --kind")
    targets = proposals.list_proposals(engine, agent=agent, kind=kind, domain=domain, status="pending")
    if not dry_run:
        return [approve(settings, engine, p["id"], who) for p in targets]
    return [queue_review.preview(settings, engine, p["id"]) for p in targets]
