"""The agent contract: no green over nothing, idempotent runs, the JSON a person's tools read,
and the Celery configuration guard (hard time limit below the visibility timeout, prefetch 1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from geode.agents.contract import Finding, ensure_tables, get_report, list_runs
from geode.agents.recording import begin_attempt, store_findings
from geode.agents.upkeep import run_agent
from tests.upkeep_helpers import expected, setup

REPO = Path(__file__).resolve().parents[1]
GEODE = str(Path(sys.executable).parent / "geode")


def _geode(*args, home, env_extra=None):
    env = dict(os.environ, GEODE_HOME=str(home))
    env.pop("GEODE_BROKER_URL", None)
    env.update(env_extra or {})
    return subprocess.run([GEODE, *args], capture_output=True, text=True, env=env, timeout=120, cwd=REPO)


# -- the examined-nothing rule (what every agent keeps: tests/test_agent_contract.py) -------------
def test_an_agent_that_walks_folders_named_by_hand_fails(tmp_path):
    """The original Cleaner's failure: it looked at the folders it knew and said all was well."""
    toml = '[upkeep]\nagents = { handpicked = "tests.upkeep_agents:HandPicked" }\n'
    settings, engine, root, _ = setup("docs_tree", tmp_path, toml)
    r = run_agent(settings, engine, "r", "handpicked")
    assert r.examined["notes"] == 3  # guide/ holds three of the six notes
    assert r.status == "failed"
    assert "examined 3 notes (and 0 unreadable) of the 6 note files" in r.message


def test_a_partly_unreadable_store_runs_and_reports_each_file(tmp_path):
    settings, engine, root, _ = setup("clean", tmp_path)
    (root / "broken.md").write_text("---\nname: [unclosed\n---\nbody\n", encoding="utf-8")
    r = run_agent(settings, engine, "r", "librarian")
    assert r.status == "ok"
    assert r.examined["notes"] == 3 and r.examined["unreadable"] == 1 and r.store_notes == 4
    assert [(f.kind, f.path, f.line) for f in r.findings] == [("unreadable", "broken.md", 2)]


# -- run records ------------------------------------------------------------------------------
def test_attempts_are_counted_before_work_and_capped(tmp_path):
    settings, engine, root, _ = setup("clean", tmp_path)
    assert begin_attempt(engine, "x", "a") == ("run", 1)
    assert begin_attempt(engine, "x", "a") == ("run", 2)
    assert begin_attempt(engine, "x", "a") == ("run", 3)
    state, rep = begin_attempt(engine, "x", "a")
    assert state == "exhausted" and rep.status == "failed" and "gave up after 3 attempts" in rep.message
    state, rep = begin_attempt(engine, "x", "a")
    assert state == "done" and rep.attempts == 4


def test_findings_keep_their_ids_across_a_rerun(tmp_path):
    settings, engine, root, _ = setup("clean", tmp_path)
    a = [Finding("broken-link", "a.md", 3, "x"), Finding("orphan", "b.md", 0)]
    store_findings(engine, "r", "librarian", a)
    ids = [f.id for f in a]
    b = [Finding("orphan", "b.md", 0), Finding("missing-path", "c.md", 1, "y")]
    store_findings(engine, "r", "librarian", b)
    assert b[0].id == ids[1]
    assert b[1].id not in ids
    from geode.agents.contract import load_findings

    assert sorted((f.kind, f.path) for f in load_findings(engine, "r")) == [
        ("missing-path", "c.md"),
        ("orphan", "b.md"),
    ]


def test_reports_are_kept_and_listed(tmp_path):
    settings, engine, root, _ = setup("skills", tmp_path)
    run_agent(settings, engine, "night-a", "librarian")
    run_agent(settings, engine, "night-b", "librarian")
    runs = list_runs(engine)
    assert [r["run_id"] for r in runs] == ["night-b", "night-a"]
    assert runs[0]["findings"] == len(expected("skills")["findings"])
    kept = get_report(engine, "night-a", "librarian")
    assert kept.status == "ok" and len(kept.findings) == len(expected("skills")["findings"])


@pytest.mark.services
def test_tables_work_on_postgresql(tmp_path):
    from sqlalchemy import create_engine, text

    url = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    try:
        admin = create_engine(url)
        with admin.connect() as c:
            c.execute(text("select 1"))
    except Exception as exc:  # the records must work on PostgreSQL: a missing server is a failure
        from tests.prereqs import absent

        absent("postgres", f"no PostgreSQL on 127.0.0.1:5432 ({str(exc).strip().splitlines()[0]})")
    schema = f"upkeep_{os.getpid()}"
    with admin.begin() as c:
        c.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        engine = create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
        from tests.upkeep_helpers import fixture_env

        # a store with one proposal to file (the records on PostgreSQL, not its geode.db)
        settings = fixture_env("cursor_rules", tmp_path)[0].settings
        ensure_tables(engine)
        r1 = run_agent(settings, engine, "pg-1", "librarian")
        r2 = run_agent(settings, engine, "pg-1", "librarian")
        assert r1.status == "ok" and r2.attempts == 1
        assert len(r1.findings) == len(expected("cursor_rules")["findings"])
        assert expected("cursor_rules")["proposals"] == 1
        assert [p["id"] for p in r2.proposals] == [p["id"] for p in r1.proposals] and len(r1.proposals) == 1
    finally:
        with admin.begin() as c:
            c.execute(text(f"DROP SCHEMA {schema} CASCADE"))


# -- the CLI ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_upkeep_json_has_the_documented_shape(tmp_path):
    from tests.upkeep_helpers import make_store

    root, _ = make_store("docs_tree", tmp_path)
    home = tmp_path / "home"
    # set up as a person would (the recall index built): upkeep fails whenever doctor would
    assert _geode("init", str(root), home=home).returncode == 0
    out = _geode("upkeep", "--store", str(root), "--json", home=home)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["doctor"] == {"ok": True, "failed": []}
    assert all(isinstance(r["held_back"], dict) for r in data["runs"])
    (run,) = [r for r in data["runs"] if r["agent"] == "librarian"]
    assert run["status"] == "ok"
    assert run["examined"]["notes"] == 6
    exp = expected("docs_tree")
    assert sorted([f["kind"], f["path"], f["line"], f["target"]] for f in run["findings"]) == sorted(
        f[:4] for f in exp["findings"]
    )
    assert all(not f["path"].startswith("/") for f in run["findings"])
    assert [sorted(p) for p in run["proposals"]] and all({"id", "kind", "paths"} <= set(p) for p in run["proposals"])
    assert len(run["proposals"]) == exp["proposals"]
    listed = _geode("upkeep", "--store", str(root), "--list", "--json", home=home)
    reports = json.loads(listed.stdout)["reports"]
    assert {r["run_id"] for r in reports} == {data["run_id"]}  # one run, one report per agent it ran
    assert sorted(r["agent"] for r in reports) == sorted(r["agent"] for r in data["runs"])


def test_upkeep_exits_non_zero_when_a_run_failed(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.txt").write_text("no notes here\n")
    out = _geode("upkeep", "--store", str(empty), home=tmp_path / "home")
    assert out.returncode == 1
    assert "FAILED" in out.stdout and "examined no notes" in out.stdout


# -- the Celery configuration guard (row 14) --------------------------------------------------
def test_celery_config_guard():
    from geode.agents.celery_app import TASKS, CeleryConfigError, agent_task, make_app

    app = make_app(env={"GEODE_BROKER_URL": "redis://127.0.0.1:6379/15", "GEODE_HOME": "/nonexistent"})
    c = app.conf
    vt = c.broker_transport_options["visibility_timeout"]
    assert c.task_time_limit < vt and c.task_soft_time_limit <= c.task_time_limit
    assert vt == 7200 and c.task_time_limit == 1800
    assert c.worker_prefetch_multiplier == 1
    assert c.task_acks_late is True and c.task_reject_on_worker_lost is True
    assert not c.task_always_eager
    for t in list(TASKS.values()) + [agent_task]:
        assert t.acks_late is True and t.reject_on_worker_lost is True
    with pytest.raises(CeleryConfigError):
        make_app(
            env={
                "GEODE_BROKER_URL": "redis://x",
                "GEODE_VISIBILITY_TIMEOUT": "600",
                "GEODE_TASK_TIME_LIMIT": "600",
                "GEODE_HOME": "/nonexistent",
            }
        )
    eager = make_app(env={"GEODE_HOME": "/nonexistent"})
    assert eager.conf.task_always_eager is True
    # no task is ever sent with a countdown or an ETA (a delayed message past the visibility
    # timeout is delivered twice)
    scanned = 0
    for room in ("agents", "scheduler", "librarian"):
        for path in (REPO / "geode" / room).rglob("*.py"):
            src = path.read_text(encoding="utf-8")
            assert not re.search(r"\b(countdown|eta)\s*=", src), path
            scanned += 1
    assert scanned >= 10  # the rooms moved under geode/ once and this scan silently read nothing


def test_an_in_process_upkeep_gives_the_environment_back(tmp_path, monkeypatch):
    """Upkeep's Celery set-up points the environment at its home while the app is imported; only
    the worker keeps it (its children inherit it). An in-process caller that kept it leaked its
    store into later work of the same process (a later test waited 240 s for vectors not its own)."""
    from geode.cli.upkeep_cmds import _celery
    from geode.kernel.config import load_settings

    store = tmp_path / "store"
    store.mkdir()
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "the-callers-home"))
    monkeypatch.delenv("GEODE_STORE", raising=False)
    settings = load_settings(store=str(store), home=str(tmp_path / "home"))
    assert settings.one_off_store  # so that _celery has a store to point the environment at
    _celery(settings)
    assert os.environ["GEODE_HOME"] == str(tmp_path / "the-callers-home")
    assert "GEODE_STORE" not in os.environ
    try:
        _celery(settings, keep_environment=True)  # the worker's way
        assert os.environ["GEODE_HOME"] == settings.home
        assert os.environ["GEODE_STORE"] == settings.domains[settings.default_domain]
    finally:
        os.environ.pop("GEODE_STORE", None)
