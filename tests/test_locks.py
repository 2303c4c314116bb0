"""The one file lock (``geode.kernel.locks.FileLock``) and the three locks built on it: the
Chroma writer lock, the scheduler's one-per-store lock and the approval queue's lock.

Contention is real: a second Python process takes the lock and holds it until told (through
its stdin) to let go, or is killed with SIGKILL, which runs no cleanup at all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from geode.kernel.locks import FileLock

REPO = Path(__file__).resolve().parents[1]

HOLDER = r"""
import sys
from geode.kernel.locks import FileLock

lock = FileLock(sys.argv[1], record_pid=True)
assert lock.acquire(None)
print("held", flush=True)
sys.stdin.readline()        # hold until told
lock.release()
print("released", flush=True)
sys.stdin.readline()        # stay alive: the release, not the exit, let it go
"""


class Holder:
    """A second process holding the lock on ``path``."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "released"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


@pytest.fixture
def holder(tmp_path):
    made = []

    def start(path: Path) -> Holder:
        h = Holder(path)
        made.append(h)
        return h

    yield start
    for h in made:
        h.close()


class Clock:
    """``time`` for the lock module: ``sleep`` moves a clock of its own and is counted, so the
    tries are checked without timing anything (a timing is a measurement on a loaded machine)."""

    def __init__(self):
        self.now, self.sleeps = 1000.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def test_a_held_lock_is_refused_at_once_and_after_its_timeout_and_names_its_holder(tmp_path, holder, monkeypatch):
    path = tmp_path / "locks" / "x.lock"  # the folder does not exist yet: the lock makes it
    h = holder(path)
    lock = FileLock(str(path))
    assert lock.acquire(0) is False and not lock.held
    clock = Clock()
    with monkeypatch.context() as mp:
        mp.setattr("geode.kernel.locks.time", clock)
        assert lock.acquire(0.3) is False and not lock.held
    # it kept trying, every poll (0.05 s), until its time was up, then said no
    assert len(clock.sleeps) >= 6 and max(clock.sleeps) == lock.poll
    assert sum(clock.sleeps) == pytest.approx(0.3)
    assert lock.holder() == str(h.proc.pid)
    h.release()
    assert lock.acquire(0) is True and lock.held
    lock.release()
    assert not lock.held


def test_a_lock_waited_for_is_taken_once_the_holder_lets_go(tmp_path, holder):
    path = tmp_path / "x.lock"
    h = holder(path)
    lock = FileLock(str(path), poll=0.02)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(lock.acquire(60)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not got  # still waiting while the other process holds it
    h.release()
    waiter.join(60)
    assert got == [True] and lock.held
    lock.release()


def test_waiting_without_a_limit_blocks_until_the_release(tmp_path, holder):
    path = tmp_path / "x.lock"
    h = holder(path)
    lock = FileLock(str(path))
    done = threading.Event()

    def take():
        with lock:
            done.set()

    waiter = threading.Thread(target=take)
    waiter.start()
    assert not done.wait(0.3)  # blocked in flock, not refused
    h.release()
    assert done.wait(60)
    waiter.join(60)
    assert not lock.held  # the with-block released it


def test_a_killed_holder_leaves_no_lock_behind(tmp_path, holder):
    path = tmp_path / "x.lock"
    h = holder(path)
    lock = FileLock(str(path), record_pid=True)
    assert not lock.acquire(0)
    h.kill()  # SIGKILL: no release, no cleanup; the kernel drops the flock with the process
    assert lock.acquire(0)
    assert lock.holder() == str(os.getpid())  # the new holder wrote its own pid over the old one
    lock.release()


def test_two_lock_objects_in_one_process_exclude_each_other_and_one_object_is_not_taken_twice(tmp_path):
    path = str(tmp_path / "x.lock")
    a, b = FileLock(path), FileLock(path)
    assert a.acquire(0)
    assert not b.acquire(0)
    with pytest.raises(RuntimeError, match="already held"):
        a.acquire(0)
    a.release()
    a.release()  # a second release is a no-op
    assert b.acquire(0)
    b.release()


def test_the_three_locks_of_geode_are_this_lock(tmp_path, holder):
    """A second process holding the very file each one locks refuses each one, and a release
    lets each one in."""
    from geode.kernel.config import load_settings
    from geode.queue.apply import queue_lock
    from geode.recall.vectors import WriterLock
    from geode.scheduler.nightly import Lock, SchedulerLocked, lock_path

    (tmp_path / "store").mkdir()
    settings = load_settings(store=str(tmp_path / "store"), home=str(tmp_path / "home"), env={})

    writer = WriterLock(settings)
    h = holder(Path(writer.path))
    assert writer.acquire(0) is False
    h.release()
    assert writer.acquire(0) is True
    writer.release()

    h = holder(Path(lock_path(settings)))
    with pytest.raises(SchedulerLocked, match=rf"pid {h.proc.pid}\b"):
        Lock(lock_path(settings)).acquire()
    h.release()
    Lock(lock_path(settings)).acquire().release()

    queue = Path(settings.home) / "locks" / "queue.lock"
    with queue_lock(settings.home):  # made by the queue (0600) before the other process opens it
        pass
    h = holder(queue)
    entered = threading.Event()

    def apply_something():
        with queue_lock(settings.home):
            with queue_lock(settings.home):  # re-entrant within one process
                entered.set()

    waiter = threading.Thread(target=apply_something)
    waiter.start()
    assert not entered.wait(0.3)  # the queue waits for the other process
    h.release()
    assert entered.wait(60)
    waiter.join(60)
    assert oct(queue.stat().st_mode & 0o777) == oct(0o600)
