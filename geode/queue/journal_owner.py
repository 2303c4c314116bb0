"""Who owns an open journal entry, and whether it is still alive.

Why: "an open journal belongs to a process that died" was true while each home had its own
records and its own queue lock. Once two homes share one records database (one
``GEODE_DATABASE_URL``), a journal another home is still working through is open too, and a
reconcile that took it for a crash's leftover finished or rolled back an apply in flight (issue
15, point 2: a mixed store, status ``conflict``). So the process that writes a journal entry
holds a liveness lock on it for the entry's whole life, taken *before* the entry is committed
(nobody can see an open entry whose owner does not hold it), and ``reconcile`` settles an entry
only when it can take that lock itself: then the owner is provably gone (the lock dies with its
holder) or finished (the caller re-reads the entry's state once it holds the lock).

- PostgreSQL: a session advisory lock ``pg_advisory_lock(JOURNAL_LOCK_CLASS, journal id)`` on a
  connection the owner keeps open for the entry's life. PostgreSQL drops it when the session
  ends, so a killed process (its socket closed) lets it go by itself.
- SQLite: an ``flock`` on ``<folder of the database>/.<database file>-journals/<id>.lock``, next
  to the database so that every home that opens the same file finds the same lock. The kernel
  drops an ``flock`` with its holder; the file is removed by its holder on release (a waiter
  that locked a removed file lets it go, as with the store's lock).

Both are one try, never a wait: a live owner means "in progress, left to it".
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from geode.kernel.locks import FileLock

#: the advisory lock's first key (any constant; these are the bytes of "geoj"), the journal id
#: is the second, so geode's journal locks never meet another application's one-key locks
JOURNAL_LOCK_CLASS = 0x67656F6A


class Ownership:
    """A held liveness lock on one journal entry; ``release`` lets it go (idempotent)."""

    def __init__(self, jid: int, conn: Any = None, lock: FileLock | None = None):
        self.jid = jid
        self._conn = conn
        self._lock = lock

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                if not conn.closed and not conn.invalidated:
                    conn.execute(text("SELECT pg_advisory_unlock(:k, :j)"), {"k": JOURNAL_LOCK_CLASS, "j": self.jid})
                    conn.commit()
            except SQLAlchemyError:  # closing the session below drops the lock anyway
                conn.invalidate()  # never hand a session that may still hold it back to the pool
            finally:
                conn.close()
        lock, self._lock = self._lock, None
        if lock is not None:
            _release_file(lock)


def _is_pg(engine) -> bool:
    return engine.dialect.name == "postgresql"


def lock_folder(settings, engine) -> str:
    """The folder of the SQLite journal locks: beside the database file (every home sharing the
    file shares the folder), or the home's ``locks/journals`` for a database with no file."""
    db = engine.url.database
    if db and db != ":memory:":
        db = os.path.abspath(db)
        return os.path.join(os.path.dirname(db), f".{os.path.basename(db)}-journals")
    else:
        folder = os.path.join(os.path.abspath(settings.home), "locks", "journals")
    return folder


def _lock_path(settings, engine, jid: int) -> str:
    return os.path.join(lock_folder(settings, engine), f"{jid}.lock")


def _take_file(path: str) -> FileLock | None:
    """One try at the lock file at ``path``; the lock when held and still the file at the path."""
    while True:
        lock = FileLock(path, mode=0o664)
        if not lock.acquire(0):
            return None
        assert lock.fd is not None
        mine = os.fstat(lock.fd)
        try:
            there = os.stat(path)
        except FileNotFoundError:
            there = None
        if there is not None and (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
            return lock
        lock.release()  # its holder removed it while we waited: try the file there now


def _release_file(lock: FileLock) -> None:
    try:
        os.unlink(lock.path)  # while still held: a waiter then sees its file is gone
    except OSError:
        pass
    lock.release()


def own(settings, engine, conn, jid: int) -> Ownership:
    """Take the liveness lock on the new entry ``jid``, inside the transaction that inserts it
    (on ``conn``, which the caller keeps open until ``release`` for PostgreSQL). Nobody else can
    hold it yet: the entry is not committed."""
    if _is_pg(engine):
        got = conn.execute(
            text("SELECT pg_try_advisory_lock(:k, :j)"), {"k": JOURNAL_LOCK_CLASS, "j": jid}
        ).scalar_one()
        if not got:  # pragma: no cover - only a lock left by a foreign program on this key
            raise RuntimeError(f"journal {jid}: its liveness lock is held by another session")
        return Ownership(jid, conn=conn)
    lock = _take_file(_lock_path(settings, engine, jid))
    if lock is None:  # pragma: no cover - as above
        raise RuntimeError(f"journal {jid}: its liveness lock is held by another process")
    return Ownership(jid, lock=lock)


def try_take(settings, engine, jid: int) -> Ownership | None:
    """The liveness lock on ``jid`` for a reconcile, or None while its owner (or another
    reconcile) is alive and holds it. The caller re-reads the entry once it holds the lock."""
    if _is_pg(engine):
        conn = engine.connect()
        try:
            got = conn.execute(
                text("SELECT pg_try_advisory_lock(:k, :j)"), {"k": JOURNAL_LOCK_CLASS, "j": jid}
            ).scalar_one()
            conn.commit()
        except BaseException:  # clean up, then re-raise: nothing is caught here
            conn.close()
            raise
        if not got:
            conn.close()
            return None
        return Ownership(jid, conn=conn)
    lock = _take_file(_lock_path(settings, engine, jid))
    return None if lock is None else Ownership(jid, lock=lock)
