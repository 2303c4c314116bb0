"""Celery with a REAL Redis broker and a REAL worker process (a killed worker, a poison task, the
configuration guard, one scheduler).

Each test uses its own queue name (and a Redis db of its own), so nothing it leaves behind
reaches another test or another process. Skipped, with the reason, when no Redis answers on
127.0.0.1:6379.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from geode.agents.contract import FINAL_STATUSES, get_report
from geode.queue import proposals
from tests.prereqs import absent
from tests.upkeep_helpers import expected, setup

pytestmark = pytest.mark.services  # Redis and real Celery workers

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REDIS_DB = 11


def _redis_ok() -> bool:
    try:
        import redis

        return bool(redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB, socket_timeout=1).ping())
    except Exception:
        return False


@pytest.fixture(autouse=True)
def _real_redis():
    """These tests need the real broker; without it they fail (skip only where scripts/test said
    it could not start one: tests/prereqs.py)."""
    if not _redis_ok():
        absent("redis", "no Redis on 127.0.0.1:6379")


TOML = """
[upkeep]
agents = { gated = "tests.upkeep_agents:Gated", poison = "tests.upkeep_agents:Poison" }
"""


class Env:
    def __init__(self, tmp_path: Path, store: str = "obsidian_vault", toml: str = TOML):
        self.settings, self.engine, self.root, _ = setup(store, tmp_path, toml)
        self.queue = f"geode-test-{uuid.uuid4().hex[:10]}"
        self.gate = tmp_path / "gate"
        self.gate.mkdir()
        self.env = dict(os.environ)
        self.env.update(
            {
                "GEODE_HOME": self.settings.home,
                "GEODE_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
                "GEODE_QUEUE": self.queue,
                "GEODE_TEST_GATE_DIR": str(self.gate),
                "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            }
        )
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def app(self):
        from geode.agents.celery_app import make_app

        return make_app(self.settings.home, self.env)

    def start_worker(self) -> subprocess.Popen:
        log = self.gate.parent / f"worker-{len(self.procs)}.log"
        self.logs.append(log)
        p = subprocess.Popen(
            [
                str(BIN / "celery"),
                "-A",
                "geode.agents.celery_app",
                "worker",
                "-Q",
                self.queue,
                "--concurrency=1",
                "--pool=prefork",
                "--loglevel=INFO",
                "-n",
                f"{self.queue}-{len(self.procs)}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=REPO,
            env=self.env,
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(p)
        self.wait(lambda: "ready" in log.read_text(), 60, f"worker did not start: {log.read_text()[-2000:]}")
        return p

    def wait(self, cond, timeout: float, message: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.2)
        raise AssertionError(message)

    def final(self, run_id: str, agent: str, timeout: float = 120):
        holder = {}

        def done():
            r = get_report(self.engine, run_id, agent)
            holder["r"] = r
            return r is not None and r.status in FINAL_STATUSES

        self.wait(
            done,
            timeout,
            f"run {run_id}/{agent} did not finish: {holder.get('r')}\n"
            + "\n".join(p.read_text()[-3000:] for p in self.logs),
        )
        return holder["r"]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    e.stop()


def test_a_run_on_a_real_worker_files_the_librarians_proposals(env):
    from geode.agents.celery_app import enqueue_upkeep

    env.start_worker()
    enqueue_upkeep(env.settings, "celery-1", ["librarian"], celery_app=env.app())
    r = env.final("celery-1", "librarian")
    assert r.status == "ok"
    assert r.examined["notes"] == expected("obsidian_vault")["examined"]["notes"]
    assert len(proposals.list_proposals(env.engine, run_id="celery-1")) == expected("obsidian_vault")["proposals"]


def test_worker_child_killed_mid_task_completes_exactly_once(env):
    """Row 12: SIGKILL the process running the task after it filed one proposal; the task is
    redelivered and the run ends with every proposal filed once (none twice, none missing)."""
    from geode.agents.celery_app import enqueue_upkeep

    worker = env.start_worker()
    want = expected("obsidian_vault")["proposals"]
    assert want >= 2  # so that "killed after the first" leaves work undone
    enqueue_upkeep(env.settings, "kill-1", ["gated"], celery_app=env.app())
    marker = env.gate / "first-attempt"
    env.wait(marker.exists, 60, "the first attempt never reached the gate")
    child = int(marker.read_text())
    assert child != worker.pid
    assert len(proposals.list_proposals(env.engine, run_id="kill-1")) == 1
    os.kill(child, signal.SIGKILL)
    r = env.final("kill-1", "gated")
    assert r.status == "ok", r.message
    assert r.attempts == 2
    filed = proposals.list_proposals(env.engine, run_id="kill-1")
    assert len(filed) == want
    assert len({p["key"] for p in filed}) == want
    assert sorted(p["id"] for p in r.proposals) == sorted(p["id"] for p in filed)


def test_poison_task_runs_at_most_three_times_then_is_failed(env):
    """Row 13: a task that kills its own worker every time is not redelivered forever."""
    import redis

    from geode.agents.celery_app import enqueue_upkeep

    env.start_worker()
    enqueue_upkeep(env.settings, "poison-1", ["poison"], celery_app=env.app())
    r = env.final("poison-1", "poison", timeout=180)
    assert r.status == "failed"
    assert "gave up after 3 attempts" in r.message
    runs = (env.gate / "poison-runs").read_text().split()
    assert len(runs) == 3
    assert len(set(runs)) == 3  # each execution died with its own process
    client = redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB)
    env.wait(lambda: client.llen(env.queue) == 0, 30, "the poison task is still queued")
    assert len((env.gate / "poison-runs").read_text().split()) == 3


@pytest.fixture
def plain_env(tmp_path):
    e = Env(tmp_path, toml="")
    yield e
    e.stop()


def test_the_scheduler_enqueues_and_a_second_scheduler_exits_with_a_lock_error(plain_env):
    """A real `geode scheduler` fires the nightly job (set a few seconds ahead), a real worker
    runs it; a second scheduler on the same store refuses to start."""
    env = plain_env
    env.start_worker()
    at = dt.datetime.now() + dt.timedelta(seconds=4)
    if at.date() != dt.date.today():  # the trigger would fall tomorrow: wait for midnight
        time.sleep((dt.datetime.combine(at.date(), dt.time()) - dt.datetime.now()).total_seconds() + 1)
        at = dt.datetime.now() + dt.timedelta(seconds=4)
    senv = dict(env.env, GEODE_UPKEEP_AT=at.strftime("%H:%M:%S"))
    cmd = [str(BIN / "geode"), "scheduler", "--home", env.settings.home, "--store", str(env.root)]
    log = env.gate.parent / "scheduler.log"
    sched = subprocess.Popen(
        cmd, cwd=REPO, env=senv, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    env.procs.append(sched)
    env.logs.append(log)
    env.wait(lambda: "next run" in log.read_text(), 60, f"scheduler did not start: {log.read_text()}")
    second = subprocess.run(cmd, cwd=REPO, env=senv, capture_output=True, text=True, timeout=60)
    assert second.returncode == 3
    assert "lock" in second.stderr
    run_id = f"night-{at.date().isoformat()}"
    r = env.final(run_id, "librarian", timeout=120)
    assert r.status == "ok"
    from sqlalchemy import select

    from geode.agents.contract import tables

    run, _f = tables()
    with env.engine.connect() as conn:
        triggers = [
            t for (t,) in conn.execute(select(run.c.trigger).where(run.c.run_id == run_id, run.c.agent == "librarian"))
        ]
    assert triggers == ["schedule"]
    filed = [p for p in proposals.list_proposals(env.engine, run_id=run_id) if p["agent"] == "librarian"]
    assert len(filed) == expected("obsidian_vault")["proposals"]


def test_one_roster_names_the_tasks_the_run_order_and_the_classes():
    """The Celery tasks, upkeep's order and its registry all read ``geode.agents.roster``."""
    from geode.agents import celery_app, roster, upkeep

    assert roster.NAMES == ("librarian", "cleaner", "gardener", "corrector")
    assert tuple(celery_app.TASKS) == roster.NAMES
    assert [t.name for t in celery_app.TASKS.values()] == [f"geode.upkeep.{n}" for n in roster.NAMES]
    assert upkeep.order() == list(roster.NAMES)
    for name, spec in roster.ROSTER:
        assert upkeep.registry()[name] == spec
        assert type(upkeep.load_agent(name)).__name__ == spec.rsplit(":", 1)[1]
