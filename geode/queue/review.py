"""What a person reads and decides about a proposal before (or instead of) approving it: the
unified diff, the dry-run preview of an approve, and rejecting.

Apart from the queue's filing and reading (``geode.queue.proposals``) because these serve the
person reviewing, on the page and on the command line; approve, undo and reconcile are
``geode.queue.apply``. Nothing here writes a file of the store.
"""

from __future__ import annotations

from geode.queue import safepath
from geode.queue.proposals import (
    REJECTABLE,
    ProposalError,
    load,
    op_of,
    record,
    result,
    set_status,
    sha256,
    stored_bytes,
    winner,
)
from geode.queue.tables import ensure_tables


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _is_binary(data: bytes | None) -> bool:
    return data is not None and b"\x00" in data[:8192]


def _file_diff(a_path: str | None, b_path: str | None, before: bytes | None, after: bytes | None) -> str:
    import difflib

    a_name = f"a/{a_path}" if before is not None else "/dev/null"
    b_name = f"b/{b_path}" if after is not None else "/dev/null"
    if _is_binary(before) or _is_binary(after):
        return f"Binary files {a_name} and {b_name} differ\n"
    return "".join(difflib.unified_diff(_lines(before or b""), _lines(after or b""), a_name, b_name))


def diff(engine, proposal_id: int) -> str:
    """The unified diff of the whole proposal, as it will be applied. A move shows as a rename
    with the diff between the old and the new content; link rewrites follow."""
    ensure_tables(engine)
    with engine.connect() as conn:
        row, changes = load(conn, proposal_id)
    if row is None:
        raise ProposalError(f"no proposal {proposal_id}")
    creates = [c for c in changes if c["before_sha"] is None]
    removes = [c for c in changes if c["after_sha"] is None]
    out = []
    paired: set[int] = set()
    if row["kind"] in ("move", "archive") and len(creates) == 1 and len(removes) == 1:
        src, dst = removes[0], creates[0]
        paired = {src["seq"], dst["seq"]}
        out.append(f"rename from {src['path']}\nrename to {dst['path']}\n")
        out.append(_file_diff(src["path"], dst["path"], stored_bytes(src["before"]), stored_bytes(dst["after"])))
    for c in changes:
        if c["seq"] in paired:
            continue
        mode = f" (mode {c['mode']:04o})" if c["mode"] is not None else ""
        out.append(f"{op_of(c['before_sha'], c['after_sha'])} {c['path']}{mode}\n")
        out.append(_file_diff(c["path"], c["path"], stored_bytes(c["before"]), stored_bytes(c["after"])))
    return "".join(out)


# -- decisions -----------------------------------------------------------------------------
def reject(settings, engine, proposal_id: int, who: str, reason: str = "") -> dict:
    """Mark a proposal rejected; no file is touched. Refused for an applied one (undo it first)."""
    ensure_tables(engine)
    with engine.begin() as conn:
        row, changes = load(conn, proposal_id)
        if row is None:
            raise ProposalError(f"no proposal {proposal_id}")
        files = [{"path": c["path"], "op": op_of(c["before_sha"], c["after_sha"])} for c in changes]
        if row["status"] not in REJECTABLE or row["journal_id"] is not None:
            why = (
                "an apply or undo of it is in progress or was interrupted"
                if row["journal_id"] is not None
                else f"it is {row['status']}" + ("; undo it first" if row["status"] == "applied" else "")
            )
            record(conn, proposal_id, "reject", "refused", who, {"reason": reason, "why": why})
            return result(proposal_id, "reject", False, row["status"], f"not rejected: {why}", files)
        if not set_status(conn, proposal_id, row["status"], "rejected", reason or ""):
            status, why = winner(conn, proposal_id)  # another actor decided first: its outcome stands
            record(conn, proposal_id, "reject", "refused", who, {"reason": reason, "why": why})
            return result(proposal_id, "reject", False, status, f"not rejected: {why}", files)
        record(conn, proposal_id, "reject", "rejected", who, {"reason": reason} if reason else None)
    return result(proposal_id, "reject", True, "rejected", reason or "rejected", files)


def preview(settings, engine, proposal_id: int) -> dict:
    """What approving would do now, reading files only (the dry run)."""
    with engine.connect() as conn:
        row, changes = load(conn, proposal_id)
    if row is None:
        raise ProposalError(f"no proposal {proposal_id}")
    files, stale, unsafe = [], [], []
    root = settings.domains.get(row["domain"])
    for c in changes:
        files.append({"path": c["path"], "op": op_of(c["before_sha"], c["after_sha"])})
        if root is None:
            continue
        try:
            cur = safepath.read(root, c["path"])
        except (safepath.UnsafePath, OSError) as exc:
            unsafe.append(f"{c['path']}: {exc}")
            continue
        if sha256(cur[0] if cur else None) != c["before_sha"]:
            stale.append(c["path"])
    if root is None:
        would, msg = "failed", f"unknown domain {row['domain']!r}"
    elif unsafe:
        would, msg = "failed", "; ".join(unsafe)
    elif stale:
        would, msg = "conflict", "changed since proposed: " + ", ".join(stale)
    else:
        would, msg = "apply", "would apply"
    out = result(proposal_id, "approve", would == "apply", row["status"], msg, files)
    out.update({"dry_run": True, "would": would, "title": row["title"], "agent": row["agent"], "kind": row["kind"]})
    return out
