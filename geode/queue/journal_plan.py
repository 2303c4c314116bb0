"""The plan of a journal entry, apart from the database: the bytes each step puts, and the
folders an apply made for its new files (removed again by its undo, or when it is rolled back).

Apart from ``geode.queue.apply`` because ``geode.queue.reconcile`` needs the same helpers to
finish or roll back what a crash left, and neither may import the other both ways.
"""

from __future__ import annotations

import json
import os

from geode.queue import proposals, safepath
from geode.queue import tables as queue_tables


def log_unrecorded(proposal_id: int, action: str, exc: BaseException) -> None:
    """An action row that could not be written (the database failed too): logged, never silent."""
    import logging

    logging.getLogger(__name__).warning(
        "proposal %s: the %s action could not be recorded: %s", proposal_id, action, exc
    )


def files_of(changes) -> list[dict]:
    return [{"path": c["path"], "op": proposals.op_of(c["before_sha"], c["after_sha"])} for c in changes]


def content_of(changes, op: str) -> dict[int, tuple[bytes | None, bytes | None]]:
    """seq -> (from bytes, to bytes) for the operation."""
    out = {}
    for c in changes:
        before, after = proposals.stored_bytes(c["before"]), proposals.stored_bytes(c["after"])
        out[c["seq"]] = (before, after) if op == "apply" else (after, before)
    return out


def missing_folders(root: safepath.Root, rel: str) -> list[str]:
    """The folders above ``rel`` that are not there yet, outermost first."""
    parts = rel.split("/")[:-1]
    out: list[str] = []
    for i in range(1, len(parts) + 1):
        folder = "/".join(parts[:i])
        if out or not safepath.lexists(root, folder):
            out.append(folder)
    return out


def remove_made_folders(engine, root: safepath.Root, proposal_id: int) -> None:
    """After an undo: remove the folders the proposal's last apply made (``_remove_folders``)."""
    _P, _C, _A, J = queue_tables.TABLES
    with engine.connect() as conn:
        plan = conn.execute(
            J.select()
            .with_only_columns(J.c.plan)
            .where(J.c.proposal_id == proposal_id, J.c.op == "apply", J.c.state == "done")
            .order_by(J.c.id.desc())
            .limit(1)
        ).scalar()
    remove_folders(root, json.loads(plan or "[]"))


def remove_folders(root: safepath.Root, plan: list[dict]) -> None:
    """Remove, deepest first, the folders an apply's ``plan`` made (after its undo, or after it
    was rolled back), each only when it is empty again (``rmdir`` refuses otherwise) and reached
    without following a symlink. Best effort: a folder someone filled or removed meanwhile is
    left as it is."""
    made = sorted({f for e in plan for f in e.get("made", [])}, key=lambda f: -f.count("/"))
    for folder in made:
        try:
            parent_fd, name = safepath.open_parent(root, folder)  # no symlink followed on the way
        except (OSError, safepath.UnsafePath):
            continue
        try:
            os.rmdir(name, dir_fd=parent_fd)  # a symlink there is ENOTDIR: left as it is
            os.fsync(parent_fd)
        except OSError:
            pass  # not empty, or gone: left as it is
        finally:
            os.close(parent_fd)
