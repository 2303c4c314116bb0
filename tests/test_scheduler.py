"""The nightly scheduler: one process per store, one enqueue
per night, and a night missed while it was down caught up exactly once."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geode.scheduler import nightly
from tests.upkeep_helpers import setup

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env(home):
    env = dict(os.environ, GEODE_HOME=str(home), PYTHONPATH=str(REPO))
    env.pop("GEODE_BROKER_URL", None)
    env.pop("GEODE_UPKEEP_AT", None)
    return env


@pytest.mark.slow
def test_only_one_of_three_scheduler_processes_runs(tmp_path):
    settings, engine, root, _ = setup("skills", tmp_path)
    cmd = [str(BIN / "geode"), "scheduler", "--home", settings.home, "--store", str(root)]
    logs = [tmp_path / f"s{i}.log" for i in range(3)]
    procs = [
        subprocess.Popen(cmd, env=_env(settings.home), cwd=REPO, stdout=open(lg, "w"), stderr=subprocess.STDOUT)
        for lg in logs
    ]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            exited = [p for p in procs if p.poll() is not None]
            running = [
                lg for p, lg in zip(procs, logs, strict=False) if p.poll() is None and "next run" in lg.read_text()
            ]
            if len(exited) == 2 and len(running) == 1:
                break
            time.sleep(0.2)
        codes = sorted(p.poll() for p in procs if p.poll() is not None)
        assert codes == [nightly.EXIT_LOCKED, nightly.EXIT_LOCKED]
        texts = [lg.read_text() for lg in logs]
        assert sum("scheduler lock error" in t for t in texts) == 2
        assert sum("next run" in t for t in texts) == 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(20)


SCRIPT = """
import sys, datetime as dt
from geode.scheduler.nightly import fire
home, store, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
sent = 0
for i in range(30):
    # the night of day i, a minute after 03:00 local
    now = dt.datetime.fromtimestamp(start) + dt.timedelta(days=i)
    sent += fire(home, store, now=now.timestamp()) is not None
print(sent)
"""


@pytest.mark.slow
def test_thirty_nights_fired_by_three_racing_processes_enqueue_thirty_runs(tmp_path):
    """Even without the lock, the night's row decides: exactly one enqueue per night."""
    settings, engine, root, _ = setup("skills", tmp_path)
    start = dt.datetime(2026, 1, 1, 3, 1).timestamp()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, settings.home, str(root), str(start)],
            env=_env(settings.home),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    assert sum(int(o[0].strip()) for o in outs) == 30
    nights = nightly.enqueued_nights(settings)
    assert nights == [f"night-{(dt.date(2026, 1, 1) + dt.timedelta(days=i)).isoformat()}" for i in range(30)]
    from sqlalchemy import func, select

    from geode.agents.contract import tables

    run, _f = tables()
    with engine.connect() as conn:
        # one run id per night, whatever number of agents each night runs
        n = conn.execute(
            select(func.count(func.distinct(run.c.run_id))).where(run.c.trigger == "schedule")
        ).scalar_one()
    assert n == 30


def _catch_up(tmp_path, monkeypatch, at: str, down_since: dt.datetime):
    """Store a job whose next fire time is ``down_since`` (the scheduler was down since), then
    start a new scheduler and count what it runs."""
    from apscheduler.events import EVENT_JOB_EXECUTED, EVENT_JOB_MISSED

    monkeypatch.setenv("GEODE_UPKEEP_AT", at)
    monkeypatch.delenv("GEODE_BROKER_URL", raising=False)
    settings, engine, root, _ = setup("skills", tmp_path)
    first = nightly.build_scheduler_keeping_missed(settings, background=True)
    first.start(paused=True)
    first.shutdown()
    # the machine went down: write the job store as a dead process left it (no scheduler runs
    # while we do, so nothing can consume the missed fire)
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    store = SQLAlchemyJobStore(engine=engine, tablename="apscheduler_jobs")
    store.start(BackgroundScheduler(), "default")
    job = store.lookup_job(nightly.JOB_ID)
    job._modify(next_run_time=down_since.astimezone())
    store.update_job(job)

    second = nightly.build_scheduler_keeping_missed(settings, background=True)
    events = {"run": 0, "missed": 0}

    def count(event):
        events["missed" if event.code == EVENT_JOB_MISSED else "run"] += 1

    second.add_listener(count, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED)
    second.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and events["run"] + events["missed"] == 0:
            time.sleep(0.1)
        time.sleep(1.0)  # let a second (wrong) catch-up show itself if there were one
        nxt = second.get_job(nightly.JOB_ID).next_run_time
    finally:
        second.shutdown()
    return settings, events, nxt


def test_misfire_after_half_an_hour_down_runs_once(tmp_path, monkeypatch):
    now = dt.datetime.now()
    due = (now - dt.timedelta(minutes=30)).replace(second=0, microsecond=0)
    # shortly after midnight `due` is yesterday: the night is still named by its due date
    # (night_of, checked across midnight below), so the same assertions hold
    settings, events, nxt = _catch_up(tmp_path, monkeypatch, due.strftime("%H:%M"), due)
    assert events == {"run": 1, "missed": 0}
    assert nightly.enqueued_nights(settings) == [f"night-{due.date().isoformat()}"]
    assert nxt > dt.datetime.now().astimezone()


def test_misfire_after_three_days_down_runs_once_coalesced(tmp_path, monkeypatch):
    now = dt.datetime.now()
    three_days_ago = (now - dt.timedelta(days=3)).replace(hour=3, minute=0, second=0, microsecond=0)
    settings, events, nxt = _catch_up(tmp_path, monkeypatch, "03:00", three_days_ago)
    assert events == {"run": 1, "missed": 0}
    latest = nightly.night_of(now, 3, 0)
    assert nightly.enqueued_nights(settings) == [f"night-{latest.date().isoformat()}"]
    assert nxt > dt.datetime.now().astimezone()


def test_a_grace_of_seconds_is_refused(tmp_path):
    settings, engine, root, _ = setup("skills", tmp_path, "[upkeep]\nmisfire_grace_hours = 0.0003\n")
    with pytest.raises(nightly.ScheduleError):
        nightly.schedule_config(settings)
    settings, engine, root, _ = setup("clean", tmp_path / "b", '[upkeep]\nat = "25:00"\n')
    with pytest.raises(nightly.ScheduleError):
        nightly.schedule_config(settings)


def test_night_of_is_the_latest_due_time():
    at3 = dt.datetime(2026, 3, 10, 2, 30)
    assert nightly.night_of(at3, 3, 0) == dt.datetime(2026, 3, 9, 3, 0)
    assert nightly.night_of(dt.datetime(2026, 3, 10, 3, 0), 3, 0) == dt.datetime(2026, 3, 10, 3, 0)


def test_a_night_is_named_by_its_due_date_across_midnight():
    """The catch-up 30 minutes after midnight belongs to yesterday's night, not today's."""
    assert nightly.night_of(dt.datetime(2026, 11, 30, 0, 15), 23, 45) == dt.datetime(2026, 11, 29, 23, 45)
    assert nightly.night_of(dt.datetime(2026, 11, 30, 23, 50), 23, 45) == dt.datetime(2026, 11, 30, 23, 45)
    assert nightly.run_id_for(nightly.night_of(dt.datetime(2026, 12, 1, 0, 5), 23, 45)) == "night-2026-11-30"


def test_a_night_whose_enqueue_failed_stays_open_and_the_next_fire_sends_it(tmp_path, monkeypatch):
    """The night's row is written before the enqueue and removed when the enqueue raises, so
    the next fire (a retry, another process) sends it; once sent, a third fire sends nothing."""
    from geode.agents import celery_app

    settings, _engine, root, _ = setup("skills", tmp_path)
    now = dt.datetime(2026, 3, 4, 3, 5).timestamp()
    sent: list[str] = []

    def broken(_settings, run_id, trigger):
        raise ConnectionError("broker down")

    monkeypatch.setattr(celery_app, "enqueue_upkeep", broken)
    with pytest.raises(ConnectionError):
        nightly.fire(settings.home, str(root), now=now)
    assert nightly.enqueued_nights(settings) == []

    monkeypatch.setattr(celery_app, "enqueue_upkeep", lambda _s, run_id, trigger: sent.append(run_id))
    assert nightly.fire(settings.home, str(root), now=now) == "night-2026-03-04"
    assert nightly.fire(settings.home, str(root), now=now) is None
    assert sent == ["night-2026-03-04"]
    assert nightly.enqueued_nights(settings) == ["night-2026-03-04"]
