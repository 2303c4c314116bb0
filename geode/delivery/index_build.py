"""The first build of a large binding index, off the hook: started by a hook, run detached.

Why: building the index of 100,000 notes takes about 30 s, and the agent kills a hook at 10 s.
Built inline, every call of a cold store was killed part-way and kept nothing, so nothing was
delivered until someone ran ``geode reindex`` (after adding a domain or an index-version change
too). Now a hook that finds no index over a store of more than ``hook_build_files`` note files
starts this module as a detached process (its own session, so the agent's kill of the hook does
not reach it) and says nothing until the index exists; smaller stores still build inline.

One builder at a time: the builder holds an exclusive ``flock`` on ``<index>.build`` for its
whole life, and writes its pid and start time into that file. A hook that cannot take the lock
knows a build is running and does not start another; a lock that can be taken means none runs
(locks die with their process, so a builder killed with SIGKILL leaves no stale lock).

No half index that looks whole: ``Index.build`` is one write transaction whose last rows are
the ``version`` and ``built`` marks, so a builder killed part-way leaves the index as it was
(missing, or of the old version), and the next hook call starts a new builder.

Standard library only, and only ``os`` and ``fcntl`` until a build must start: the hook imports
this module on every call that finds no index.
"""

from __future__ import annotations

import os
import sys
import time

if __name__ == "__main__":  # run by path, as hookmain is: the folder that holds ``geode/`` goes first
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:  # POSIX only; without it every hook call may start a builder, and the spare ones exit at once
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from geode.kernel.crystal import NOTE_SUFFIXES, SKIP_DIRS  # noqa: E402 - after the path, when run by path

_MAX_LOG = 256 * 1024


def lock_path(index_file: str) -> str:
    return index_file + ".build"


def running(index_file: str) -> dict | None:
    """``{"pid", "started_at"}`` of the builder running now, or None when none runs."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock_path(index_file), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raw = os.read(fd, 200).decode("ascii", "replace").split()
            info: dict = {"pid": 0, "started_at": 0.0}
            try:
                info = {"pid": int(raw[0]), "started_at": float(raw[1])}
            except (IndexError, ValueError):
                pass  # the builder has the lock but has not written its line yet
            return info
        return None  # free: no builder holds it
    finally:
        os.close(fd)


def more_files_than(settings, limit: int) -> bool:
    """Whether the store holds more than ``limit`` note files; stops counting at ``limit + 1``,
    so the cost is bounded by the limit, never by the store."""
    seen = 0
    for root in settings.domains.values():
        todo = [root]
        while todo:
            try:
                entries = list(os.scandir(todo.pop()))
            except OSError:
                continue
            for e in entries:
                name = e.name
                try:
                    if e.is_dir(follow_symlinks=False):
                        if name not in SKIP_DIRS:
                            todo.append(e.path)
                        continue
                except OSError:
                    continue
                if name.endswith(NOTE_SUFFIXES) and not name.startswith("."):
                    seen += 1
                    if seen > limit:
                        return True
    return False


def start(settings, index_file: str, env: dict) -> dict:
    """Start the detached builder unless one runs; returns ``{"state": "started"|"running", ...}``.
    Raises OSError when the process cannot be started (the hook logs it and stays silent)."""
    info = running(index_file)
    if info is not None:
        return {"state": "running", **info}
    import subprocess  # only here: about 5 ms the hook pays once per build it starts

    script = os.path.abspath(__file__)
    os.makedirs(os.path.dirname(index_file), exist_ok=True)
    log = os.path.join(settings.home, "index-build.log")  # the builder's stderr: why a build failed
    try:
        if os.path.getsize(log) > _MAX_LOG:
            os.replace(log, log + ".1")
    except OSError:
        pass  # no log yet
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=settings.home,
            start_new_session=True,  # the agent's kill of the hook's process group does not reach it
            close_fds=True,
        )
    return {"state": "started", "pid": proc.pid, "started_at": time.time()}


def build(env: dict | None = None) -> int:
    """The builder: take the lock (exit 0 when another builder has it), build unless the index is
    already whole, release. Returns the exit status."""
    from geode.delivery.index import Index, index_path
    from geode.kernel.config import load_settings

    settings = load_settings(env=dict(os.environ) if env is None else env)
    path = index_path(settings)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None and not _lock(fd):
            return 0  # another builder runs: it builds
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {time.time()!r}\n".encode("ascii"))
        idx = Index(settings, busy_ms=60_000)
        try:
            if not idx.is_built():
                idx.build()
        finally:
            idx.close()
        return 0
    finally:
        os.close(fd)  # releases the lock


def _lock(fd: int, wait_s: float = 0.5) -> bool:
    """The builder's exclusive lock. Waits a little: a hook's ``running`` check holds a shared
    lock for microseconds, and a builder that gave up at once would leave the store unbuilt
    until the next call."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


if __name__ == "__main__":
    sys.exit(build())
