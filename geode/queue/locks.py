"""The locks of the approval queue: the home's queue lock, the store's own lock, and the
temporary files' names that stay unique across homes.

Apart from ``geode.queue.apply`` (applying and undoing) and ``geode.queue.reconcile``
(settling what a crash left) because both take them, and a lock reads better on its own than
between the steps it guards. Why each exists is said where it is defined.
"""

from __future__ import annotations

import os
import secrets
import threading
import zlib
from contextlib import contextmanager

from geode.kernel.locks import FileLock
from geode.queue.safepath import StoreRoot, StoreUnavailable

_locks: dict[str, list] = {}
_tlock = threading.RLock()

#: the store's own lock, a file in its root that exists only while an apply, undo or reconcile
#: holds it (no walk reads a dot-file; a snapshot of the store after an apply finds no trace)
STORE_LOCK = ".geode-store.lock"


@contextmanager
def _held(path: str, take):
    """``take()`` (a held ``FileLock``) once per process: exclusive across processes,
    re-entrant within one; ``release`` of what it returned when the outermost use ends."""
    with _tlock:
        entry = _locks.get(path)
        if entry is None or entry[2] != os.getpid():
            entry = _locks[path] = [take(), 0, os.getpid()]
        entry[1] += 1
        try:
            yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del _locks[path]
                entry[0].release()


def queue_lock(home: str):
    """The home's queue lock (``GEODE_HOME/locks/queue.lock``), waited for as long as it takes:
    one apply, undo or reconcile at a time per records database."""
    path = os.path.join(os.path.abspath(home), "locks", "queue.lock")

    def take() -> FileLock:
        lock = FileLock(path, mode=0o600)
        lock.acquire(None)
        return lock

    return _held(path, take)


class _StoreLock(FileLock):
    """A ``FileLock`` whose file is removed on release, so that it leaves nothing in the store.

    Removing a lock file is safe only when a waiter checks, once it holds the lock, that the
    file it locked is still the one at the path (the same inode); a waiter that locked a file
    since removed lets it go and tries again on the new one."""

    #: a duplicate of the descriptor of the store folder the holder works in (``store_lock``'s
    #: ``at``), so the lock is proved to be in that folder and removed from it, never by a path
    #: that may name another folder by then
    dir_fd: int | None = None

    def take(self) -> _StoreLock:
        while True:
            if not os.path.isdir(os.path.dirname(self.path)):  # FileLock would make the folder
                raise FileNotFoundError(2, "the store folder is not there", os.path.dirname(self.path))
            self.acquire(None)
            assert self.fd is not None
            mine = _ident(os.fstat(self.fd))
            if _ident_at(self.path) == mine:
                if self.dir_fd is not None and _ident_at(STORE_LOCK, self.dir_fd) != mine:
                    FileLock.release(self)
                    self._close_dir()
                    raise StoreUnavailable(
                        f"the store folder {os.path.dirname(self.path)} was replaced by another folder "
                        "while its lock was taken; nothing changed, try again"
                    )
                return self
            FileLock.release(self)

    def release(self) -> None:
        if self.fd is not None:
            mine = _ident(os.fstat(self.fd))
            try:
                # while still held: a waiter then sees its file is gone; removed from the folder it
                # is in, and only while it is the file there
                if self.dir_fd is not None:
                    if _ident_at(STORE_LOCK, self.dir_fd) == mine:
                        os.unlink(STORE_LOCK, dir_fd=self.dir_fd)
                elif _ident_at(self.path) == mine:
                    os.unlink(self.path)
            except OSError:
                pass  # left for the next holder, who takes it over as it is
        FileLock.release(self)
        self._close_dir()

    def _close_dir(self) -> None:
        fd, self.dir_fd = self.dir_fd, None
        if fd is not None:
            os.close(fd)


def _ident(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _ident_at(path: str, dir_fd: int | None = None) -> tuple[int, int] | None:
    try:
        return _ident(os.stat(path, dir_fd=dir_fd, follow_symlinks=False))
    except OSError:
        return None


def store_lock(root: str, at: StoreRoot | None = None):
    """The store's lock (``<root>/.geode-store.lock``), taken inside the queue lock around every
    apply, undo and reconcile that touches the store: homes with their own queues and records
    (journal ids start at 1 in each) never interleave their files on one store. A store that is
    not there is an ``OSError``, never recreated. Created 0664 less the umask, so that people
    who share a store's folder can share its lock. ``at``: the store folder the holder opened
    once; the lock taken must be the file in that folder (``StoreUnavailable`` otherwise: the
    path was swapped for another folder meanwhile), and it is removed from that folder."""
    path = os.path.join(os.path.abspath(root), STORE_LOCK)

    def take() -> _StoreLock:
        lock = _StoreLock(path, mode=0o664)
        if at is not None and at.fd is not None:
            lock.dir_fd = os.dup(at.fd)
        return lock.take()

    return _held(path, take)


def tmp_name(home: str, jid: int, seq: int) -> str:
    """A temporary file's name, unique across homes, processes and runs: the home (a crc32 of its
    path), the pid, the journal entry, the file's place in the plan and a random token. Journal
    ids start at 1 in every home, so ``.geode-<journal>-<seq>.tmp`` alone named one home's temp
    file the same as another's; the put still creates it with ``O_EXCL``."""
    tag = zlib.crc32(os.path.abspath(home).encode("utf-8", "surrogateescape"))
    return f".geode-{tag:08x}-{os.getpid()}-{jid}-{seq}-{secrets.token_hex(4)}.tmp"


def sweep_store_lock(root: str) -> None:
    """Remove a store lock file left by a holder that was killed (nobody holds it: one try,
    never a wait), so a crash leaves nothing in the store once the next command has run."""
    path = os.path.join(os.path.abspath(root), STORE_LOCK)
    if path in _locks or not os.path.lexists(path):
        return
    lock = _StoreLock(path, mode=0o664)
    try:
        if lock.acquire(0):
            mine = os.fstat(lock.fd) if lock.fd is not None else None
            there = os.lstat(path)
            if mine is not None and (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
                lock.release()  # removes it
            else:
                FileLock.release(lock)
    except OSError:
        FileLock.release(lock)  # a store that cannot be written: the apply says so, not this
