"""The draft builders the agents use: the ``FileChange`` list of a proposal, made from a
domain's files as they are now (their sha256 read here, so a file that changes before approval
is a conflict, never an overwrite): ``new_note_change``, ``move_changes``, ``archive_changes``,
``status_change``, and ``set_frontmatter_status``, the status edit by the one frontmatter editor.

Apart from ``geode.queue.proposals`` (the queue: filing, reading, rejecting) because these are
what an agent calls before it files, and the queue never calls them. ``current`` (a domain's
file as it is now) and ``edit_change`` (one file changed) are used outside the agents too (the
MCP server's ``write_note`` files an edit with them).
"""

from __future__ import annotations

import re

from geode.kernel.frontmatter_edit import FrontmatterEditError, set_key
from geode.queue import safepath
from geode.queue.proposals import FileChange, ProposalError, domain_root, sha256

DEFAULT_ARCHIVE_DIR = "archive"


def current(settings, domain: str, path: str) -> tuple[bytes, int] | None:
    """``(bytes, mode)`` of a file of the domain now, None when absent (``UnsafePath`` if refused)."""
    return safepath.read(domain_root(settings, domain), path)


def as_bytes(data) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def edit_change(settings, domain: str, path: str, after) -> FileChange:
    """A change of an existing file to ``after`` (bytes or text), hashed as it is now."""
    cur = current(settings, domain, path)
    if cur is None:
        raise ProposalError(f"{path}: no such file in domain {domain!r}")
    return FileChange(path, sha256(cur[0]), as_bytes(after))


def new_note_change(settings, domain: str, path: str, text, mode: int | None = None) -> FileChange:
    if current(settings, domain, path) is not None:
        raise ProposalError(f"{path}: already exists in domain {domain!r}")
    return FileChange(path, None, as_bytes(text), mode)


def move_changes(
    settings, domain: str, src: str, dst: str, *, content=None, rewrites: dict | None = None
) -> list[FileChange]:
    """A move of ``src`` to ``dst`` (same bytes and mode unless ``content`` is given), plus the
    link rewrites in other files (``{path: new bytes}``): one proposal, several changes.
    Order: the new file first, the rewrites, the removal of the source last."""
    cur = current(settings, domain, src)
    if cur is None:
        raise ProposalError(f"{src}: no such file in domain {domain!r}")
    if current(settings, domain, dst) is not None:
        raise ProposalError(f"{dst}: already exists in domain {domain!r}")
    data, mode = cur
    changes = [FileChange(dst, None, data if content is None else as_bytes(content), mode)]
    for path, after in (rewrites or {}).items():
        if path in (src, dst):
            raise ProposalError(f"{path}: a rewrite may not touch the moved file itself")
        changes.append(edit_change(settings, domain, path, after))
    changes.append(FileChange(src, sha256(data), None))
    return changes


def archive_changes(
    settings, domain: str, path: str, *, archive_dir: str = DEFAULT_ARCHIVE_DIR, rewrites: dict | None = None
) -> list[FileChange]:
    """A move of ``path`` into the archive folder (same relative path under it) with
    frontmatter ``status: archived``."""
    cur = current(settings, domain, path)
    if cur is None:
        raise ProposalError(f"{path}: no such file in domain {domain!r}")
    archive_dir = archive_dir.strip("/")
    if path == archive_dir or path.startswith(archive_dir + "/"):
        raise ProposalError(f"{path}: already in the archive folder {archive_dir}/")
    return move_changes(
        settings,
        domain,
        path,
        f"{archive_dir}/{path}",
        content=set_frontmatter_status(cur[0], "archived", path),
        rewrites=rewrites,
    )


def status_change(settings, domain: str, path: str, status: str) -> FileChange:
    cur = current(settings, domain, path)
    if cur is None:
        raise ProposalError(f"{path}: no such file in domain {domain!r}")
    return FileChange(path, sha256(cur[0]), set_frontmatter_status(cur[0], status, path))


def set_frontmatter_status(data: bytes, status: str, path: str = "") -> bytes:
    """``data`` with the top-level frontmatter key ``status`` set, by the one frontmatter editor
    (``geode.kernel.frontmatter_edit``): its whole old value replaced, every other byte (BOM,
    line endings, the body, invalid UTF-8 in the body) as it was; a file with no frontmatter
    gets one. ``ProposalError`` (naming ``path``) when that cannot be done safely."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", status):
        raise ProposalError(f"status {status!r}: letters, digits, '_', '.', '-' only")
    try:
        return set_key(data, "status", status, path=path)
    except FrontmatterEditError as exc:
        raise ProposalError(str(exc)) from None
