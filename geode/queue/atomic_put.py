"""One file of a proposal put in place atomically: a temporary file in the target's own folder
(``geode.queue.apply.tmp_name``: the home, pid, journal, seq and a random token; created 0600 with ``O_EXCL | O_NOFOLLOW``), every byte written,
``fsync``, the mode set with ``fchmod``, the target's sha256 checked again, ``os.replace``,
``fsync`` of the folder. A removal (the source of a move) is a checked ``unlink`` and a folder
``fsync``. Every step is made relative to a folder descriptor opened without following symlinks
(``geode.queue.safepath``).

Apart from ``geode.queue.apply`` (the journal, the proposal's status, reconcile) because this is
the file system half, with no database: ``apply`` calls ``put``, ``remove_tmp`` and
``file_state``. ``after_step`` is the seam the crash tests replace to kill a process after a
given step, here and in ``apply``'s journal steps.
"""

from __future__ import annotations

import errno
import os

from geode.kernel.errors import StoreError
from geode.queue import safepath
from geode.queue.proposals import sha256


def after_step(step: str, path: str) -> None:
    """Called after each step, in this order: ``journal_intent`` (``apply``), ``write``,
    ``fsync``, ``chmod``, ``replace``, ``dir_fsync`` (here, per file), ``journal_mark``
    (``apply``); the crash tests replace it with one that calls ``os._exit``."""


class FileConflict(StoreError):
    """A file's sha256 is not the one expected immediately before replacing it."""

    def __init__(self, path: str, expected: str | None, found: str | None):
        super().__init__(
            f"{path}: changed meanwhile (sha256 {(found or 'absent')[:12]}, expected {(expected or 'absent')[:12]})"
        )
        self.path = path


_umask: int | None = None


def default_mode() -> int:
    """0o666 less the process umask: the mode a new file would get from ``open``."""
    global _umask
    if _umask is None:
        try:
            with open("/proc/self/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("Umask:"):
                        _umask = int(line.split()[1], 8)
                        break
        except OSError:
            pass
        if _umask is None:
            _umask = os.umask(0o022)
            os.umask(_umask)
    return 0o666 & ~_umask


def _check(dirfd: int, leaf: str, rel: str, expect_sha: str | None) -> None:
    cur = safepath.read_at(dirfd, leaf, rel)
    found = sha256(cur[0]) if cur is not None else None
    if found != expect_sha:
        raise FileConflict(rel, expect_sha, found)


def _unlink_quiet(name: str, dirfd: int) -> None:
    try:
        os.unlink(name, dir_fd=dirfd)
    except FileNotFoundError:
        pass


def put(root: safepath.Root, rel: str, data: bytes | None, mode: int | None, expect_sha: str | None, tmp: str) -> None:
    """Make ``rel`` hold ``data`` with ``mode`` (None data: remove it), atomically, provided
    its sha256 is ``expect_sha`` immediately before (``FileConflict`` otherwise)."""
    try:
        dirfd, leaf = safepath.open_parent(root, rel, create=data is not None)
    except FileNotFoundError:
        if data is None and expect_sha is None:
            return  # removing what is not there, and expected not to be
        raise FileConflict(rel, expect_sha, None) from None
    try:
        if data is None:
            _check(dirfd, leaf, rel, expect_sha)
            if expect_sha is None:
                return
            os.unlink(leaf, dir_fd=dirfd)
            after_step("replace", rel)
            os.fsync(dirfd)
            after_step("dir_fsync", rel)
            return
        _unlink_quiet(tmp, dirfd)  # a leftover of a crash of this same journal entry
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    if n <= 0:  # pragma: no cover - write(2) returns >0 or raises
                        raise OSError(errno.EIO, "short write")
                    view = view[n:]
                after_step("write", rel)
                os.fsync(fd)
                after_step("fsync", rel)
                os.fchmod(fd, mode if mode is not None else default_mode())
                after_step("chmod", rel)
            finally:
                os.close(fd)
            _check(dirfd, leaf, rel, expect_sha)  # again, immediately before the replace
            os.replace(tmp, leaf, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        except BaseException:  # clean up, then re-raise: nothing is caught here
            try:
                _unlink_quiet(tmp, dirfd)
            except OSError:
                pass  # reconcile removes it by name
            raise
        after_step("replace", rel)
        os.fsync(dirfd)
        after_step("dir_fsync", rel)
    finally:
        os.close(dirfd)


def remove_tmp(root: safepath.Root, rel: str, tmp: str) -> None:
    try:
        dirfd, _leaf = safepath.open_parent(root, rel)
    except (FileNotFoundError, safepath.UnsafePath):
        return
    try:
        _unlink_quiet(tmp, dirfd)
    finally:
        os.close(dirfd)


def file_state(root: safepath.Root, rel: str, from_sha: str | None, to_sha: str | None) -> str:
    try:
        cur = safepath.read(root, rel)
    except safepath.UnsafePath:
        return "unsafe"
    found = sha256(cur[0]) if cur is not None else None
    if found == to_sha:
        return "to"
    if found == from_sha:
        return "from"
    return "other"
