"""A real Celery worker for the tests that need one (doctor's workers check, the embedding task):
started as a person starts it, in its own process group, and stopped with the whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def start_worker(queue: str, env: dict, log: Path, *extra: str) -> subprocess.Popen:
    """``celery -A geode.agents.celery_app worker -Q queue`` (concurrency 1, no gossip, mingle or
    heartbeat: nothing but the queue), its output in ``log``; ``extra``: more worker options."""
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "celery"), "-A", "geode.agents.celery_app", "worker", "-Q", queue]
        + ["--concurrency=1", "--loglevel=INFO", "-n", f"{queue}@%h", *extra]
        + ["--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=REPO,
        env=env,
        stdout=open(log, "w"),  # noqa: SIM115 - the worker's, closed when it exits
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_group(proc: subprocess.Popen, grace: float = 20) -> None:
    """TERM the process's group (the worker and its pool children), KILL it after ``grace``."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
