"""``geode doctor``: green only when every part can do its job on this store; never green over a
store an agent could not read (the original passed a foreign store its four agents could not use)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.upkeep_helpers import make_store
from tests.workers import start_worker, stop_group

REPO = Path(__file__).resolve().parents[1]
GEODE = str(Path(sys.executable).parent / "geode")


def doctor(store, home, *extra, env_extra=None):
    env = dict(os.environ, GEODE_HOME=str(home))
    env.pop("GEODE_BROKER_URL", None)
    env.update(env_extra or {})
    # the installed hooks doctor looks for: this test's own user folder, never the real ~
    user = ("--home-dir", str(Path(home).parent / "user"))
    out = subprocess.run(
        [GEODE, "doctor", *(("--store", str(store)) if store else ()), "--json", *user, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=REPO,
    )
    return out.returncode, json.loads(out.stdout), out.stderr


def by_name(data):
    return {c["name"]: c for c in data["checks"]}


@pytest.mark.slow
def test_doctor_is_green_on_a_clean_store_with_the_model(tmp_path):
    root, _ = make_store("clean", tmp_path)
    # the recall index is part of the store's parts: without it prompt-time recall hands over nothing
    rc, data, err = doctor(root, tmp_path / "home")
    assert rc == 1 and not by_name(data)["recall"]["ok"]
    assert "run `geode reindex`" in by_name(data)["recall"]["message"]
    env = dict(os.environ, GEODE_HOME=str(tmp_path / "home"))
    env.pop("GEODE_BROKER_URL", None)
    r = subprocess.run([GEODE, "reindex", "--store", str(root)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    rc, data, err = doctor(root, tmp_path / "home")
    checks = by_name(data)
    assert rc == 0 and data["ok"] is True, data
    assert checks["recall"]["examined"]["notes"] == 3
    assert checks["agent:librarian"]["examined"]["notes"] == 3
    assert checks["index"]["examined"]["files"] == 3
    assert checks["model"]["ok"] and checks["model"]["examined"]["dim"] > 0
    assert {"store", "ledger", "agent:librarian", "index", "broker", "model"} <= set(checks)


def test_doctor_fails_on_an_empty_store(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("plain text, no notes\n")
    rc, data, _ = doctor(empty, tmp_path / "home", "--skip-model")
    checks = by_name(data)
    assert rc == 1 and data["ok"] is False
    assert not checks["store"]["ok"] and not checks["agent:librarian"]["ok"]
    assert "examined no notes" in checks["agent:librarian"]["message"]


def test_doctor_is_never_green_over_a_file_an_agent_could_not_read(tmp_path):
    root, _ = make_store("docs_tree", tmp_path)
    (root / "guide" / "legacy.md").write_bytes(b"# Legacy\n\xff\xfe latin-1 bytes\n")
    rc, data, _ = doctor(root, tmp_path / "home", "--skip-model")
    checks = by_name(data)
    assert rc == 1 and data["ok"] is False
    lib = checks["agent:librarian"]
    assert not lib["ok"]
    assert "examined 6 of 7 note files" in lib["message"] and "guide/legacy.md:2" in lib["message"]


def test_doctor_reports_an_index_that_does_not_match_the_files(tmp_path):
    """An index that lost a row (corruption, a crash of an old version) is not papered over:
    the folder mtimes have not changed, so the hook would never notice; the doctor does."""
    root, _ = make_store("cursor_rules", tmp_path)
    hidden = root / ".cursor" / "rules"
    hidden.mkdir(parents=True)
    (hidden / "extra.mdc").write_text("---\ndescription: x\nalwaysApply: true\n---\nBe brief.\n")
    home = tmp_path / "home"
    rc, data, _ = doctor(root, home, "--skip-model")
    checks = by_name(data)
    # Cursor keeps rules in .cursor/rules: the store walk and the binding index both see them
    assert checks["agent:librarian"]["examined"]["notes"] == 5
    assert checks["index"]["ok"], checks["index"]
    import sqlite3

    from geode.delivery.index import index_path
    from tests.stores import GeodeEnv

    path = index_path(GeodeEnv(tmp_path, root=root, env=None).settings)  # as the doctor resolved it
    with sqlite3.connect(path) as c:
        assert c.execute("DELETE FROM files WHERE path LIKE '.cursor/%'").rowcount == 1
    rc, data, _ = doctor(root, home, "--skip-model")
    checks = by_name(data)
    assert not checks["index"]["ok"]
    assert "holds 4 note files, the store 5" in checks["index"]["message"]
    assert rc == 1


@pytest.mark.slow
def test_doctor_fails_when_the_configured_broker_does_not_answer(tmp_path):
    root, _ = make_store("clean", tmp_path)
    rc, data, _ = doctor(
        root, tmp_path / "home", "--skip-model", env_extra={"GEODE_BROKER_URL": "redis://127.0.0.1:1/0"}
    )
    checks = by_name(data)
    assert rc == 1 and not checks["broker"]["ok"]
    assert "does not answer" in checks["broker"]["message"]
    assert checks["agent:librarian"]["ok"]


def _celery_env(tmp_path) -> dict:
    """A real Redis broker (db 11, as the Celery tests use) and a queue of this test's own, so
    that no other test's worker answers for it."""
    return {"GEODE_BROKER_URL": "redis://127.0.0.1:6379/11", "GEODE_QUEUE": f"geode-doctor-{uuid.uuid4().hex[:10]}"}


@pytest.mark.services
def test_doctor_fails_when_no_worker_serves_the_queue(tmp_path):
    """A broker that answers with no worker alive: queued upkeep would wait forever."""
    root, _ = make_store("clean", tmp_path)
    rc, data, _ = doctor(root, tmp_path / "home", "--skip-model", env_extra=_celery_env(tmp_path))
    checks = by_name(data)
    assert checks["broker"]["ok"], checks["broker"]  # the real Redis answers ...
    assert not checks["workers"]["ok"] and "no worker consumes queue" in checks["workers"]["message"]
    assert rc == 1 and data["ok"] is False  # ... and doctor is not green


@pytest.mark.services
def test_doctor_passes_the_workers_check_with_a_live_worker(tmp_path):
    root, _ = make_store("clean", tmp_path)
    extra = _celery_env(tmp_path)
    env = dict(os.environ, GEODE_HOME=str(tmp_path / "home"), **extra)
    log = tmp_path / "worker.log"
    worker = start_worker(extra["GEODE_QUEUE"], env, log)
    try:
        deadline = time.monotonic() + 60
        while "ready" not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        rc, data, _ = doctor(root, tmp_path / "home", "--skip-model", env_extra=extra)
        checks = by_name(data)
        assert checks["workers"]["ok"], checks["workers"]
        assert extra["GEODE_QUEUE"] in checks["workers"]["message"] and "1 worker(s)" in checks["workers"]["message"]
    finally:
        stop_group(worker)


def _init(home: Path) -> None:
    env = dict(os.environ, GEODE_HOME=str(home))
    env.pop("GEODE_BROKER_URL", None)
    r = subprocess.run([GEODE, "init"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_doctor_fails_on_hooks_that_point_at_a_missing_interpreter(tmp_path):
    """A deleted virtual environment: the installed hook runs nothing on every tool call."""
    home, project = tmp_path / "home", tmp_path / "proj"
    _init(home)
    store = None  # the configured store that init wrote
    settings = project / ".claude" / "settings.local.json"
    settings.parent.mkdir(parents=True)
    gone = tmp_path / "old-venv" / "bin" / "python3"
    hookmain = REPO / "geode" / "delivery" / "hookmain.py"
    cmd = f"{gone} -S {hookmain} claude"
    settings.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": cmd}]}]}})
    )
    rc, data, _ = doctor(store, home, "--skip-model", "--project", str(project))
    hooks = by_name(data)["hooks"]
    assert rc == 1 and not hooks["ok"] and f"{gone} does not exist" in hooks["message"]
    settings.write_text(settings.read_text().replace(str(gone), sys.executable))
    rc, data, _ = doctor(store, home, "--skip-model", "--project", str(project))
    assert by_name(data)["hooks"]["ok"], by_name(data)["hooks"]


@pytest.mark.slow
def test_doctor_fails_on_hook_errors_newer_than_its_last_run(tmp_path):
    import time

    home = tmp_path / "home"
    _init(home)
    store = None  # the configured store that init wrote
    rc, data, _ = doctor(store, home, "--skip-model")
    assert by_name(data)["hook-errors"]["ok"] and by_name(data)["recall"]["ok"]  # init built the recall index
    time.sleep(1.1)  # the log's times are to the second
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    (home / "hook-errors.log").write_text(f"{stamp} KeyError: 'tool_input'\n  File \"hook.py\", line 1\n")
    rc, data, _ = doctor(store, home, "--skip-model")
    errs = by_name(data)["hook-errors"]
    assert rc == 1 and not errs["ok"] and errs["examined"]["new_errors"] == 1
    assert "KeyError: 'tool_input'" in errs["message"]
    rc, data, _ = doctor(store, home, "--skip-model")  # seen by the last run: no longer a failure
    assert by_name(data)["hook-errors"]["ok"]
