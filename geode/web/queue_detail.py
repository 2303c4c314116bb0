"""One proposal on the page: everything about it (summary, rationale, evidence resolved to its
findings and ledger rows, the change list, the diff as text and as data) and what deciding it
would meet now (:func:`check`, reading files only).

Apart from the queue's list (``geode.web.queue``) because it reads one proposal in depth: the
agents' findings, the ledger and the files under the store.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from geode.agents import contract
from geode.kernel import team_rules
from geode.queue import proposals as Q
from geode.queue import review as queue_review
from geode.queue import safepath
from geode.records.models import LedgerEvent, table_of
from geode.web import diffview
from geode.web.queue import QueueError, iso, night_label


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
    t = table_of(LedgerEvent)
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
    got = Q.get(engine, proposal_id)
    if got is None:
        raise QueueError(f"no proposal {proposal_id}", 404)
    p: dict[str, Any] = dict(got)  # the page's view: the proposal and what the page adds to it
    with engine.connect() as conn:
        row, changes = Q.load(conn, proposal_id)
    p["diff"] = queue_review.diff(engine, proposal_id)
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
    refusal = None if undoing else team_rules.write_refusal(settings, row["domain"])
    if refusal is not None:  # what ``apply`` refuses, the preview says (a derived folder)
        return {"would": "failed", "message": refusal, "stale": []}
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
