"""A night's record of what it expected and what ran (``geode.agents.nights``), the send's retry
policy, and a send that fails leaving nothing queued. The real broker restart is in
tests/test_night_broker_restart.py."""

from __future__ import annotations

import pytest

from geode.agents import nights
from geode.agents.celery_app import CeleryConfigError, broker_settings, make_app, publish_retry_policy
from geode.agents.contract import list_runs
from tests.upkeep_helpers import setup


def _row(agent, status, attempts=1, started=1000.0, finished=1001.0, run_id="night-x"):
    return {
        "run_id": run_id,
        "agent": agent,
        "status": status,
        "attempts": attempts,
        "started_at": started,
        "finished_at": finished,
        "message": "",
    }


def test_a_night_with_agents_that_never_ran_is_failed_as_partial():
    rows = [
        _row("corrector", "failed", attempts=0),
        _row("librarian", "ok"),
        _row("gardener", "failed", attempts=0),
        _row("cleaner", "ok"),
    ]
    got = nights.judge(rows, now=1002.0)
    assert got["status"] == "failed"
    assert got["message"] == "partial: gardener, corrector never ran"
    assert got["ran"] == ["librarian", "cleaner"] and got["expected"] == [
        "librarian",
        "cleaner",
        "gardener",
        "corrector",
    ]


def test_queued_agents_are_waiting_until_the_night_stops_moving_for_a_visibility_timeout():
    rows = [_row("librarian", "ok", finished=1000.0), _row("cleaner", "queued", attempts=0, started=990.0, finished=0)]
    assert nights.judge(rows, now=1000.0 + 60, stale_s=7200)["status"] == "running"
    late = nights.judge(rows, now=1000.0 + 7201, stale_s=7200)
    assert (late["status"], late["message"]) == ("failed", "partial: cleaner never ran")


def test_an_agent_that_ran_and_failed_is_failed_not_partial():
    got = nights.judge([_row("librarian", "ok"), _row("cleaner", "failed", attempts=2)], now=1002.0)
    assert (got["status"], got["message"], got["never_ran"]) == ("failed", "failed: cleaner", [])
    assert nights.judge([_row("librarian", "ok"), _row("cleaner", "nothing-to-learn")], now=5.0)["status"] == "ok"


def test_the_send_retries_long_enough_to_ride_out_a_broker_restart():
    """Celery's default policy (3 retries: 0, 0.2, 0.4 s) gave up after 0.6 s."""
    for seconds in (0, 1, 5, 60, 300):
        p = publish_retry_policy(seconds)
        waits = [min(i * p["interval_step"], p["interval_max"]) for i in range(p["max_retries"])]
        assert sum(waits) >= seconds and p["max_retries"] >= 1
        assert sum(waits) < seconds + 2 * p["interval_max"] + 1  # not far beyond what was asked


def test_the_app_takes_the_policy_from_send_retry_s(tmp_path):
    settings, _e, _r, _ = setup("skills", tmp_path, '[upkeep]\nbroker_url = "redis://127.0.0.1:1/0"\n')
    policy = make_app(settings=settings).conf.task_publish_retry_policy
    assert policy == publish_retry_policy(60.0)
    settings, _e, _r, _ = setup("skills", tmp_path / "neg", "[upkeep]\nsend_retry_s = -1.0\n")
    with pytest.raises(CeleryConfigError, match="send_retry_s"):
        broker_settings(settings)


def test_a_night_that_cannot_be_sent_leaves_nothing_queued(tmp_path):
    """The broker refusing the first send: the error reaches the sender and the night's queued
    rows are taken back (the scheduler's next fire sends it afresh)."""
    from kombu.exceptions import OperationalError

    from geode.agents.celery_app import enqueue_upkeep

    settings, engine, _r, _ = setup(
        "skills", tmp_path, '[upkeep]\nbroker_url = "redis://127.0.0.1:1/0"\nsend_retry_s = 0.0\n'
    )
    with pytest.raises(OperationalError):
        enqueue_upkeep(settings, "night-refused", trigger="schedule", celery_app=make_app(settings=settings))
    assert [r for r in list_runs(engine) if r["run_id"] == "night-refused"] == []


def test_expected_agents_are_queued_and_a_failed_task_marks_the_rest_never_run(tmp_path):
    settings, engine, _r, _ = setup("skills", tmp_path)
    nights.expect(engine, "night-y", ["librarian", "cleaner", "gardener"], "schedule")
    assert {r["agent"]: r["status"] for r in list_runs(engine)} == dict.fromkeys(
        ["librarian", "cleaner", "gardener"], "queued"
    )
    from geode.agents.upkeep import run_agent

    assert run_agent(settings, engine, "night-y", "librarian", "schedule").status != "failed"
    assert nights.mark_never_ran(engine, "night-y", "the librarian task failed") == ["cleaner", "gardener"]
    state = nights.night_states(list_runs(engine), stale_s=7200)[0]
    assert state["message"] == "partial: cleaner, gardener never ran"


def test_an_agent_running_past_the_visibility_timeout_never_finished():
    rows = [_row("librarian", "ok"), _row("cleaner", "running", started=1000.0, finished=0)]
    assert nights.judge(rows, now=1500.0, stale_s=7200)["status"] == "running"
    late = nights.judge(rows, now=1000.0 + 7201, stale_s=7200)
    assert (late["status"], late["message"], late["never_finished"]) == (
        "failed",
        "partial: cleaner never finished",
        ["cleaner"],
    )


def test_an_agent_that_never_ran_runs_when_its_night_is_sent_again(tmp_path):
    """Marked never run is not the agent's last word: a rerun of the night id runs it."""
    from geode.agents.upkeep import run_agent

    settings, engine, _r, _ = setup("skills", tmp_path)
    nights.expect(engine, "night-z", ["librarian"], "schedule")
    nights.mark_never_ran(engine, "night-z", "the broker went away")
    report = run_agent(settings, engine, "night-z", "librarian", "manual")
    assert report.attempts == 1 and report.status != "failed", report.message
    assert nights.night_states(list_runs(engine), stale_s=7200)[0]["status"] == "ok"
