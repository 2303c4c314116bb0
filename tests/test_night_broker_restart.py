"""A night whose broker restarts under it (issue 22, point 7): a REAL Redis of the test's own
(``redis-server`` on a free port, no persistence, as a child process: the machine's Redis on
6379 is never touched) and a REAL Celery worker run the four agents chained; while the Cleaner
runs, Redis is killed and started again on the same port.

- For about 5 s: the worker's send of the Gardener retries with backoff (``[upkeep]
  send_retry_s``) and the whole night runs; Celery's default gave up after 0.6 s and the
  Gardener and Corrector never ran while the two before them said ok.
- Longer than ``send_retry_s``: the night cannot finish, and it says so: the two agents that did
  not run are failed, never run, and ``geode upkeep --list``, the page (``/health``, ``/api/nights``) and
  ``geode doctor`` call the night failed: ``partial: gardener, corrector never ran``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from geode.agents.contract import FAILED, FINAL_STATUSES, get_report
from tests.upkeep_helpers import setup
from tests.workers import start_worker, stop_group

pytestmark = [pytest.mark.services, pytest.mark.slow]  # its own Redis and a real Celery worker

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
AGENTS = ["librarian", "cleaner", "gardener", "corrector"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnRedis:
    """A redis-server of this test's own on ``port``: started, killed and started again."""

    def __init__(self, port: int, log: Path):
        self.port, self.log, self.proc = port, log, None

    def start(self) -> None:
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed"
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--daemonize", "no"],
            stdout=open(self.log, "a"),  # noqa: SIM115 - the server's, closed when it exits
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"redis-server did not start on {self.port}: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait(cond, timeout: float, message) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(message() if callable(message) else message)


class Night:
    """A store, its home pointed at the test's Redis, a worker, and a night sent to it."""

    def __init__(self, tmp_path: Path, send_retry_s: float | None):
        self.port = _free_port()
        self.queue = f"geode-night-{uuid.uuid4().hex[:8]}"
        self.gate = tmp_path / "gate"
        self.gate.mkdir()
        self.redis = OwnRedis(self.port, tmp_path / "redis.log")
        toml = (
            "[upkeep]\n"
            f'broker_url = "redis://127.0.0.1:{self.port}/0"\n'
            f'queue = "{self.queue}"\n'
            + (f"send_retry_s = {send_retry_s}\n" if send_retry_s is not None else "")
            + 'agents = { cleaner = "tests.upkeep_agents:HeldCleaner" }\n'
        )
        self.settings, self.engine, self.root, _ = setup("obsidian_vault", tmp_path, toml)
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("GEODE_BROKER_URL", "GEODE_QUEUE", "GEODE_SEND_RETRY_S")
        }
        self.env.update(
            {
                "GEODE_HOME": self.settings.home,
                "GEODE_TEST_GATE_DIR": str(self.gate),
                "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            }
        )
        self.worker_log = tmp_path / "worker.log"
        self.worker = None
        self.run_id = f"night-{uuid.uuid4().hex[:8]}"

    def start(self) -> None:
        self.redis.start()
        self.worker = start_worker(self.queue, self.env, self.worker_log)
        wait(lambda: "ready" in self.worker_log.read_text(), 90, lambda: self.worker_log.read_text()[-3000:])

    def send(self) -> None:
        from geode.agents.celery_app import enqueue_upkeep, make_app

        enqueue_upkeep(self.settings, self.run_id, trigger="schedule", celery_app=make_app(settings=self.settings))

    def outage_while_the_cleaner_runs(self, down_s: float) -> float:
        """Kill Redis once the Cleaner has started, let the Cleaner finish, start Redis again
        ``down_s`` later. Returns the seconds it was down."""
        wait(lambda: (self.gate / "cleaner-started").exists(), 120, lambda: self.worker_log.read_text()[-3000:])
        self.redis.kill()
        down = time.monotonic()
        (self.gate / "cleaner-go").write_text("go")
        wait(
            lambda: self.report("cleaner") is not None and self.report("cleaner").status in FINAL_STATUSES,
            60,
            "the cleaner did not finish",
        )
        time.sleep(max(0.0, down_s - (time.monotonic() - down)))
        self.redis.start()
        return time.monotonic() - down

    def report(self, agent: str):
        return get_report(self.engine, self.run_id, agent)

    def geode(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / "geode"), *args, "--home", self.settings.home, "--store", str(self.root)],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def stop(self) -> None:
        if self.worker is not None:
            stop_group(self.worker)
        self.redis.kill()


@pytest.fixture
def night_factory(tmp_path):
    made: list[Night] = []

    def make(send_retry_s: float | None) -> Night:
        n = Night(tmp_path, send_retry_s)
        made.append(n)
        return n

    yield make
    for n in made:
        n.stop()


def test_a_five_second_redis_restart_mid_night_and_all_four_agents_still_run(night_factory):
    night = night_factory(None)  # the default send_retry_s (60 s)
    night.start()
    night.send()
    down = night.outage_while_the_cleaner_runs(5.0)
    assert 4.5 < down < 15
    # after the restart the worker reconnects and the retried send of the Gardener lands
    wait(
        lambda: all((r := night.report(a)) is not None and r.status in FINAL_STATUSES for a in AGENTS),
        120,
        lambda: (
            "the night did not finish after the broker came back: "
            + str({a: (night.report(a).status if night.report(a) else None) for a in AGENTS})
            + "\n"
            + night.worker_log.read_text()[-4000:]
        ),
    )
    reports = {a: night.report(a) for a in AGENTS}
    assert {a: r.status != FAILED for a, r in reports.items()} == dict.fromkeys(AGENTS, True), {
        a: (r.status, r.message) for a, r in reports.items()
    }
    assert all(r.attempts >= 1 for r in reports.values())
    retried = len(re.findall(r"Retrying refused callback publish", night.worker_log.read_text()))
    assert retried >= 1, "the send never met the outage: the test examined nothing"
    listed = night.geode("upkeep", "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    state = next(n for n in json.loads(listed.stdout)["nights"] if n["run_id"] == night.run_id)
    assert state["status"] == "ok" and state["never_ran"] == [] and state["ran"] == AGENTS, state


def test_a_night_the_broker_outlasts_is_failed_as_partial_everywhere(night_factory):
    night = night_factory(1)  # the send gives up after about a second
    night.start()
    night.send()
    night.outage_while_the_cleaner_runs(8.0)
    wait(
        lambda: (r := night.report("corrector")) is not None and r.status == FAILED,
        30,
        lambda: (
            "the agents that could not be sent are not marked: "
            + str({a: (night.report(a).status if night.report(a) else None) for a in AGENTS})
            + "\n"
            + night.worker_log.read_text()[-4000:]
        ),
    )
    for agent in ("librarian", "cleaner"):
        assert night.report(agent).status != FAILED, night.report(agent).message
    for agent in ("gardener", "corrector"):
        r = night.report(agent)
        assert r.status == FAILED and r.attempts == 0 and r.message.startswith("never ran:"), (r.status, r.message)
        assert "send_retry_s" in r.message
    said = "partial: gardener, corrector never ran"

    listed = night.geode("upkeep", "--list")
    assert listed.returncode == 0, listed.stderr
    assert f"{night.run_id}: FAILED ({said})" in listed.stdout, listed.stdout
    as_json = night.geode("upkeep", "--list", "--json")
    state = next(n for n in json.loads(as_json.stdout)["nights"] if n["run_id"] == night.run_id)
    assert (state["status"], state["never_ran"], state["message"]) == ("failed", ["gardener", "corrector"], said)

    from tests.web_helpers import Server, request

    with Server(Path(night.settings.home), "--store", str(night.root)) as web:
        status, _h, body = request(web, "GET", "/api/nights")
        assert status == 200, body
        page = next(n for n in json.loads(body)["nights"] if n["run_id"] == night.run_id)
        assert (page["status"], page["message"], page["never_ran"]) == ("failed", said, ["gardener", "corrector"])
        status, _h, html = request(web, "GET", "/health")
        assert status == 200 and said.encode() in html, html[:2000]

    doctor = night.geode("doctor", "--json", "--skip-model")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "nights")
    assert not check["ok"] and said in check["message"], check
