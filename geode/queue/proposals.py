"""The approval queue: every edit an agent wants is filed here first, and a person decides.

Tables (SQLModel; created and upgraded by the records migrations, ``geode.records.migrations``;
SQLite by default, PostgreSQL by URL):

- ``proposal``: one row per proposal: agent, kind, domain, title, rationale, evidence (JSON),
  ``run_id`` + ``key`` (unique: filing the same pair twice is a no-op), status.
- ``proposal_change``: the files it touches, in the order they are applied: ``path`` relative
  to the domain root, ``before_sha`` (None: the file must not exist), the bytes seen when it
  was filed (``before``, for the diff and for undo), ``after`` (None: the file is removed),
  the requested mode, and the mode found when it was applied (``before_mode``, for undo).
- ``proposal_action``: who did what, when (filed, approve, reject, undo, reconcile).
- ``proposal_journal``: the intent journal of apply and undo (see ``geode/queue/apply.py``, which also holds approve, undo and reconcile).

The tables are defined in ``geode.queue.tables``; the ``FileChange`` lists an agent files
are built by ``geode.queue.changes``; the diff, the dry-run preview and rejecting are
``geode.queue.review``.

Statuses: ``pending`` (filed, waiting), ``applied``, ``rejected``, ``undone``, ``conflict``
(a file changed since the proposal was made; approving again re-checks), ``failed`` (a path
became unusable, e.g. a folder was replaced by a symlink).

Why the bytes are stored and not only hashes: undo must restore the exact bytes, and the diff a
person reads must be the one that will be applied, whatever happens to the file meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from geode.kernel.errors import GeodeError
from geode.queue import safepath
from geode.queue.tables import A, C, F, P, ensure_tables

KINDS = ("edit", "move", "archive", "status", "new_note")
STATUSES = ("pending", "applied", "rejected", "undone", "conflict", "failed")
#: Statuses from which ``approve`` applies (it re-checks every hash first).
APPROVABLE = ("pending", "undone", "conflict", "failed")
REJECTABLE = ("pending", "undone", "conflict", "failed")


class ProposalError(GeodeError, ValueError):
    """A draft that cannot be filed, or an action that cannot be taken; the message says why."""


class Conflict(ProposalError):
    """A file is not what the proposal says it was (its sha256 differs from ``before_sha``)."""

    def __init__(self, message: str, paths: list[str]):
        super().__init__(message)
        self.paths = paths


# -- the engine -----------------------------------------------------------------------------
def open_queue(settings):
    """The records engine (``geode.records.models.init_db``) with the queue's tables present."""
    from geode.records import models

    engine = models.init_db(settings)
    ensure_tables(engine)
    return engine


# -- drafts -------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileChange:
    """One file of a proposal. ``path`` relative to the domain root; ``before_sha`` the sha256
    hex of the current bytes (None: the file must not exist); ``after`` the new bytes (None:
    the file is removed, as the source of a move is); ``mode`` the new file's permission bits
    (None: keep the file's mode, or the umask default for a new file)."""

    path: str
    before_sha: str | None
    after: bytes | None
    mode: int | None = None


@dataclass
class ProposalDraft:
    """What an agent files. ``evidence``: ``[{"finding": id}, {"ledger_event": id}, ...]``,
    at least one item (principle 4: a proposal cites what justifies it). ``facts``: the facts
    it rests on, ``[{"kind", "path", "line", "value", "provenance"}]`` (``provenance``:
    ``person`` or ``geode:<proposal id>``), set by the filing gate
    (``geode.agents.filing``) after it checked each one against the applied proposals."""

    agent: str
    kind: str
    domain: str
    title: str
    rationale: str
    evidence: list
    changes: list
    run_id: str
    key: str
    facts: list = field(default_factory=list)


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def domain_root(settings, domain: str) -> str:
    try:
        return settings.domains[domain]
    except KeyError:
        raise ProposalError(f"unknown domain {domain!r}; configured: {', '.join(settings.domains) or 'none'}") from None


# -- filing -------------------------------------------------------------------------------
def now_ts() -> float:
    """The queue's clock: seconds since the epoch for ``created_at``/``updated_at``/``finished_at``.

    One function so filing, deciding, applying and reconciling stamp rows the same way."""
    return time.time()


def _validate_kind(kind: str, changes: list[FileChange]) -> None:
    creates = [c for c in changes if c.before_sha is None]
    removes = [c for c in changes if c.after is None]
    edits = [c for c in changes if c.before_sha is not None and c.after is not None]
    if kind in ("edit", "status") and (creates or removes):
        raise ProposalError(f"a {kind} proposal changes existing files only")
    if kind == "new_note" and (not creates or removes):
        raise ProposalError("a new_note proposal creates files and removes none")
    if kind in ("move", "archive") and (len(creates) != 1 or len(removes) != 1):
        raise ProposalError(
            f"a {kind} proposal creates exactly one file and removes exactly one "
            f"(the rest are link rewrites); got {len(creates)} and {len(removes)}"
        )
    del edits


def _validate(settings, draft: ProposalDraft) -> tuple[str, list[tuple[FileChange, bytes | None]]]:
    if draft.kind not in KINDS:
        raise ProposalError(f"kind {draft.kind!r}; expected one of {', '.join(KINDS)}")
    for name in ("agent", "run_id", "key", "title"):
        value = getattr(draft, name)
        if not isinstance(value, str) or not value.strip():
            raise ProposalError(f"{name} must be a non-empty string")
    if len(draft.run_id) > 255 or len(draft.key) > 255:
        raise ProposalError("run_id and key are at most 255 characters")
    ev = draft.evidence
    if (
        not isinstance(ev, list)
        or not ev
        or not all(isinstance(e, dict) and ("finding" in e or "ledger_event" in e) for e in ev)
    ):
        raise ProposalError('evidence must be a non-empty list of {"finding": id} / {"ledger_event": id}')
    for fact in draft.facts:
        if not (
            isinstance(fact, dict)
            and isinstance(fact.get("kind"), str)
            and fact["kind"]
            and isinstance(fact.get("path", ""), str)
            and isinstance(fact.get("line", 0), int)
        ):
            raise ProposalError('facts must be a list of {"kind": str, "path": str, "line": int, "value": ...}')
    root = domain_root(settings, draft.domain)
    changes = list(draft.changes)
    if not changes:
        raise ProposalError("a proposal needs at least one file change")
    seen = set()
    checked = []
    stale = []
    for c in changes:
        if not isinstance(c, FileChange):
            raise ProposalError(f"changes must be FileChange, got {type(c).__name__}")
        try:
            safepath.split(c.path)
        except safepath.UnsafePath as exc:
            raise ProposalError(f"unsafe path: {exc}") from exc
        if c.path in seen:
            raise ProposalError(f"{c.path}: named twice in one proposal")
        seen.add(c.path)
        if c.after is not None and not isinstance(c.after, (bytes, bytearray, memoryview)):
            raise ProposalError(f"{c.path}: after must be bytes or None")
        if c.before_sha is None and c.after is None:
            raise ProposalError(f"{c.path}: neither before nor after: nothing to do")
        if c.before_sha is not None and not re.fullmatch(r"[0-9a-f]{64}", c.before_sha):
            raise ProposalError(f"{c.path}: before_sha must be 64 lowercase hex digits")
        if c.mode is not None and not (isinstance(c.mode, int) and 0 <= c.mode <= 0o7777):
            raise ProposalError(f"{c.path}: mode must be permission bits (0..0o7777)")
        try:
            cur = safepath.read(root, c.path)
        except safepath.UnsafePath as exc:
            raise ProposalError(f"unsafe path: {exc}") from exc
        data = cur[0] if cur is not None else None
        if sha256(data) != c.before_sha:
            stale.append(c.path)
        checked.append((FileChange(c.path, c.before_sha, None if c.after is None else bytes(c.after), c.mode), data))
    if stale:
        raise Conflict(f"changed since the agent read it (sha256 differs from before_sha): {', '.join(stale)}", stale)
    if all(sha256(c.after) == c.before_sha for c, _ in checked):
        raise ProposalError("the proposal changes nothing")
    _validate_kind(draft.kind, [c for c, _ in checked])
    return root, checked


def file_proposal(settings, engine, draft: ProposalDraft) -> int | None:
    """File a proposal; its id, or None when ``(run_id, key)`` was filed before.

    Raises ``Conflict`` when a file's sha256 is not ``before_sha`` now, ``ProposalError`` for
    anything else wrong with the draft (unsafe path, unknown kind or domain, no evidence).
    """
    ensure_tables(engine)
    with engine.connect() as conn:
        if conn.execute(select(P.c.id).where(P.c.run_id == draft.run_id, P.c.key == draft.key)).first():
            return None
    _root, checked = _validate(settings, draft)
    now = now_ts()
    try:
        with engine.begin() as conn:
            if conn.execute(select(P.c.id).where(P.c.run_id == draft.run_id, P.c.key == draft.key)).first():
                return None
            pid = conn.execute(
                P.insert()
                .values(
                    run_id=draft.run_id,
                    key=draft.key,
                    agent=draft.agent,
                    kind=draft.kind,
                    domain=draft.domain,
                    title=draft.title,
                    rationale=draft.rationale or "",
                    evidence=json.dumps(draft.evidence, default=str),
                    status="pending",
                    message="",
                    created_at=now,
                    updated_at=now,
                    journal_id=None,
                )
                .returning(P.c.id)
            ).scalar_one()
            conn.execute(
                C.insert(),
                [
                    dict(
                        proposal_id=pid,
                        seq=i,
                        path=c.path,
                        before_sha=c.before_sha,
                        after_sha=sha256(c.after),
                        before=data,
                        after=c.after,
                        mode=c.mode,
                        before_mode=None,
                    )
                    for i, (c, data) in enumerate(checked)
                ],
            )
            if draft.facts:
                conn.execute(F.insert(), fact_rows(pid, draft.facts))
            record(conn, pid, "filed", "pending", draft.agent, {"run_id": draft.run_id, "key": draft.key})
            return int(pid)
    except IntegrityError:
        # Filed by a concurrent process between our check and our insert: the unique
        # (run_id, key) constraint decided; it is filed once.
        with engine.connect() as conn:
            if conn.execute(select(P.c.id).where(P.c.run_id == draft.run_id, P.c.key == draft.key)).first():
                return None
        raise


def fact_rows(proposal_id: int, facts: list) -> list[dict]:
    """The ``proposal_fact`` rows of a draft's facts, in their order."""
    return [
        dict(
            proposal_id=proposal_id,
            seq=i,
            kind=f["kind"],
            path=f.get("path", ""),
            line=int(f.get("line", 0)),
            value=json.dumps(f.get("value"), default=str, ensure_ascii=False),
            provenance=str(f.get("provenance") or "person"),
        )
        for i, f in enumerate(facts)
    ]


def read_facts(conn, proposal_id: int) -> list[dict]:
    """The facts a proposal rests on, in their order; ``[]`` for one filed before the facts
    table existed (its evidence is its findings and the rationale's words)."""
    out = []
    for r in conn.execute(select(F).where(F.c.proposal_id == proposal_id).order_by(F.c.seq)).mappings():
        try:
            value = json.loads(r["value"])
        except ValueError:
            value = r["value"]
        out.append(
            {"kind": r["kind"], "path": r["path"], "line": r["line"], "value": value, "provenance": r["provenance"]}
        )
    return out


def record(conn, proposal_id: int, action: str, outcome: str, who: str, detail=None) -> None:
    """One row of who did what, when."""
    conn.execute(
        A.insert().values(
            proposal_id=proposal_id,
            action=action,
            outcome=outcome,
            who=who or "unknown",
            at=now_ts(),
            detail=json.dumps(detail, default=str) if detail is not None else "",
        )
    )


# -- reading -------------------------------------------------------------------------------
def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def op_of(before_sha, after_sha) -> str:
    """What a stored change does to its file (``create``, ``delete`` or ``modify``), read from
    which side of it has a hash; the review, the journal plan and the listings all say it so."""
    if before_sha is None:
        return "create"
    if after_sha is None:
        return "delete"
    return "modify"


class ProposalSummary(TypedDict):
    """One proposal as the queue lists it: what ``list_proposals`` and ``summary`` return."""

    id: int
    agent: str
    kind: str
    domain: str
    title: str
    status: str
    paths: list[str]
    run_id: str
    key: str
    created_at: str | None
    updated_at: str | None
    message: str


class ChangeSummary(TypedDict):
    path: str
    op: str
    before_sha: str | None
    after_sha: str | None
    mode: str | None
    before_mode: str | None


class ActionSummary(TypedDict):
    action: str
    outcome: str
    who: str
    at: str | None
    detail: Any


class ProposalDetail(ProposalSummary, total=False):
    """What ``get`` returns: the summary, then (always set by ``get``) the rest of the proposal."""

    rationale: str
    evidence: list
    facts: list[dict]
    changes: list[ChangeSummary]
    actions: list[ActionSummary]


def summary(row, paths: list[str]) -> ProposalSummary:
    """One proposal as the queue lists it (the CLI, the page and the API share this shape)."""
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
        "created_at": _iso(row["created_at"]),
        "updated_at": _iso(row["updated_at"]),
        "message": row["message"],
    }


def list_proposals(
    engine,
    *,
    agent: str | None = None,
    kind: str | None = None,
    status: str | None = None,
    domain: str | None = None,
    run_id: str | None = None,
    limit: int | None = None,
) -> list[ProposalSummary]:
    """Proposals matching every filter given, oldest first: ``[{id, agent, kind, domain, title,
    status, paths, run_id, key, created_at, updated_at, message}]``."""
    ensure_tables(engine)
    stmt = select(P).order_by(P.c.id)
    for col, value in (
        (P.c.agent, agent),
        (P.c.kind, kind),
        (P.c.status, status),
        (P.c.domain, domain),
        (P.c.run_id, run_id),
    ):
        if value is not None:
            stmt = stmt.where(col == value)
    if limit is not None:
        stmt = stmt.limit(limit)
    with engine.connect() as conn:
        rows = conn.execute(stmt).mappings().all()
        paths: dict[int, list[str]] = {}
        if rows:
            ids = [r["id"] for r in rows]
            for start in range(0, len(ids), 500):
                for pid, path in conn.execute(
                    select(C.c.proposal_id, C.c.path)
                    .where(C.c.proposal_id.in_(ids[start : start + 500]))
                    .order_by(C.c.proposal_id, C.c.seq)
                ):
                    paths.setdefault(pid, []).append(path)
    return [summary(r, paths.get(r["id"], [])) for r in rows]


def load(conn, proposal_id: int):
    """``(proposal row, [change rows])`` as mappings, or ``(None, [])``."""
    row = conn.execute(select(P).where(P.c.id == proposal_id)).mappings().first()
    if row is None:
        return None, []
    changes = conn.execute(select(C).where(C.c.proposal_id == proposal_id).order_by(C.c.seq)).mappings().all()
    return row, list(changes)


def get(engine, proposal_id: int) -> ProposalDetail | None:
    """Everything about one proposal except the bytes: the summary plus ``rationale``,
    ``evidence``, ``facts`` [{kind, path, line, value, provenance}], ``changes`` [{path, op, before_sha, after_sha, mode, before_mode}] and
    ``actions`` [{action, outcome, who, at, detail}]. None when there is no such id."""
    ensure_tables(engine)
    with engine.connect() as conn:
        row, changes = load(conn, proposal_id)
        if row is None:
            return None
        actions = conn.execute(select(A).where(A.c.proposal_id == proposal_id).order_by(A.c.id)).mappings().all()
        facts = read_facts(conn, proposal_id)
    out = ProposalDetail(**summary(row, [c["path"] for c in changes]))
    out["rationale"] = row["rationale"]
    out["evidence"] = json.loads(row["evidence"] or "[]")
    out["facts"] = facts
    out["changes"] = [
        {
            "path": c["path"],
            "op": op_of(c["before_sha"], c["after_sha"]),
            "before_sha": c["before_sha"],
            "after_sha": c["after_sha"],
            "mode": _mode_str(c["mode"]),
            "before_mode": _mode_str(c["before_mode"]),
        }
        for c in changes
    ]
    out["actions"] = [
        {
            "action": a["action"],
            "outcome": a["outcome"],
            "who": a["who"],
            "at": _iso(a["at"]),
            "detail": json.loads(a["detail"]) if a["detail"] else None,
        }
        for a in actions
    ]
    return out


def _mode_str(mode: int | None) -> str | None:
    return None if mode is None else f"{mode:04o}"


def stored_bytes(value) -> bytes | None:
    """A ``before``/``after`` column as bytes (drivers return ``memoryview`` or ``bytes``),
    ``None`` kept for "no file on that side"."""
    return None if value is None else bytes(value)


# -- races between actors sharing one records database --------------------------------------
_DONE_BY = {
    "applied": "already applied",
    "undone": "already undone",
    "rejected": "already rejected",
    "conflict": "already found in conflict",
    "failed": "already marked failed",
}


def winner(conn, proposal_id: int) -> tuple[str, str]:
    """``(status, message)`` for an actor that lost a compare-and-set on the proposal's status:
    what the proposal is now and who made it so, from the last action that set that status.
    Why: two homes sharing one records database approve the same proposal; the one that waited
    must say "already applied by pa", never write its own stale verdict over the winner's
    (issue 22, point 1)."""
    row = conn.execute(select(P).where(P.c.id == proposal_id)).mappings().first()
    if row is None:
        return "", f"proposal {proposal_id} is gone"
    if row["journal_id"] is not None:
        return row["status"], "another process (this home or another) is applying or undoing it now"
    if row["status"] not in _DONE_BY:  # pending again: rolled back by another home or process
        return row["status"], f"it is {row['status']} again (another home or process decided meanwhile)"
    last = (
        conn.execute(
            select(A)
            .where(A.c.proposal_id == proposal_id, A.c.outcome == row["status"])
            .order_by(A.c.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    by = f" by {last['who']}" if last is not None else ""
    return row["status"], f"{_DONE_BY[row['status']]}{by} (another home or process)"


def set_status(conn, proposal_id: int, seen: str, status: str, message: str, claim: int | None = None, **extra) -> bool:
    """Compare-and-set the status: ``UPDATE ... WHERE id = :id AND status = :seen`` and the
    proposal claimed by the journal entry ``claim`` (None: claimed by nobody); ``extra``: more
    columns to set (``journal_id=None`` to release the claim). False when another actor changed
    it first (``winner`` says how); nothing is written then."""
    cond = P.c.journal_id.is_(None) if claim is None else P.c.journal_id == claim
    done = conn.execute(
        P.update()
        .where(P.c.id == proposal_id, P.c.status == seen, cond)
        .values(status=status, message=message, updated_at=now_ts(), **extra)
    )
    return done.rowcount == 1


# -- a decision's result (reject here and in queue_review; approve, undo in apply) -----------
def result(proposal_id: int, action: str, ok: bool, status: str, message: str, files: list) -> dict:
    return {"id": proposal_id, "action": action, "ok": ok, "status": status, "message": message, "files": files}
