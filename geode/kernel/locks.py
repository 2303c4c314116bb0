"""One exclusive lock on a file, held by one process: ``flock`` on a lock file, taken at once,
within a time limit, or waiting as long as it takes, and released when the holder releases it
or exits (the kernel drops an ``flock`` with the last descriptor of its open file, so a lock
never outlives a killed holder and needs no stale-lock cleanup).

Why one helper: the Chroma writer lock (``geode.recall.vectors``), the scheduler's one-per-store
lock (``geode.scheduler.nightly``) and the approval queue's lock (``geode.queue.apply``) each
wrote this open/``flock``/retry/sleep loop themselves. The ledger's spool claim
(``geode.delivery.ledger._claim``) keeps its own loop: it is on the hook's path, locks a file it
did not create and must not create, and checks the file's link count after the lock.

Standard library only (``fcntl``, POSIX). ``tests/test_locks.py`` holds it to its word with a
real second process.
"""

from __future__ import annotations

import fcntl
import os
import time


class FileLock:
    """An exclusive ``flock`` on ``path`` (created with ``mode`` when absent, its folder too).

    ``record_pid``: the holder writes its pid into the file, so that a process refused the lock
    can say who holds it (``holder()``). ``poll``: seconds between tries while waiting with a
    time limit.
    """

    def __init__(self, path: str, *, mode: int = 0o644, record_pid: bool = False, poll: float = 0.05):
        self.path = path
        self.mode = mode
        self.record_pid = record_pid
        self.poll = poll
        self.fd: int | None = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def acquire(self, timeout: float | None = 0.0) -> bool:
        """Take the lock; True when held. ``timeout`` 0: one try; > 0: try every ``poll``
        seconds until that many seconds have passed; None: wait as long as it takes."""
        if self.fd is not None:
            raise RuntimeError(f"{self.path}: this lock is already held by this object")
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, self.mode)
        try:
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + timeout
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            os.close(fd)
                            return False
                        time.sleep(min(self.poll, left))
            if self.record_pid:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except BaseException:  # clean up, then re-raise: nothing is caught here
            try:
                os.close(fd)
            except OSError:
                pass
            raise
        self.fd = fd
        return True

    def release(self) -> None:
        """Let the lock go (a no-op when it is not held)."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def holder(self) -> str:
        """The pid the holder wrote into the file ('' when none is written or it cannot be read)."""
        try:
            with open(self.path, "rb") as fh:
                return fh.read(64).decode("ascii", "replace").strip()
        except OSError:
            return ""

    def __enter__(self) -> FileLock:
        self.acquire(None)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
