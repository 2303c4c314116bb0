"""The command line under faults (issue 15, point 6), with real processes: every id's outcome
reported when one id does not exist, and the machine's failures (a read-only GEODE_HOME, a
corrupt records database, a PostgreSQL URL whose driver is not installed) said in one line that
starts ``geode:``, never a traceback."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from geode.kernel.config import load_settings
from geode.queue import changes as CH
from geode.queue import proposals as Q
from tests.stores import NO_BACKGROUND_BUILD, write
from tests.test_apply import draft

ROOT = Path(__file__).resolve().parent.parent


def run(home: Path, *args: str, env: dict | None = None, user: int | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT), "USER": "tester"})
    e.update(env or {})

    # an unprivileged user (root may write anywhere, so a read-only home would not be one);
    # through util-linux's setpriv, which reaches an interpreter installed under /root
    prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user is not None else []
    return subprocess.run(
        [*prefix, sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=e, timeout=120
    )


def one_line_message(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode != 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("geode:")]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def two_edits(tmp_path):
    home, store = tmp_path / "home", tmp_path / "store"
    home.mkdir()
    (home / "geode.toml").write_text(f"[domains]\nmain = {json.dumps(str(store))}\n", encoding="utf-8")
    write(store, "a.md", b"a\n")
    write(store, "b.md", b"b\n")
    s = load_settings(home=home, env={})
    engine = Q.open_queue(s)
    ids = [
        Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", f"{n}.md", f"{n.upper()}\n".encode())]))
        for n in "ab"
    ]
    engine.dispose()
    return home, store, ids


def test_approve_reports_every_id_when_one_does_not_exist_json(two_edits):
    home, store, (a, b) = two_edits
    r = run(home, "proposals", "approve", str(a), "999", str(b), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    results = json.loads(r.stdout)["results"]
    assert [(x["id"], x["ok"], x["status"]) for x in results] == [
        (a, True, "applied"),
        (999, False, None),
        (b, True, "applied"),
    ]
    assert results[1]["message"] == "no proposal 999"
    assert (store / "a.md").read_bytes() == b"A\n" and (store / "b.md").read_bytes() == b"B\n"


@pytest.mark.slow
def test_approve_reports_every_id_when_one_does_not_exist_text(two_edits):
    home, store, (a, _b) = two_edits
    r = run(home, "proposals", "approve", str(a), "999")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"proposal {a} approved and applied."
    assert lines[1] == "proposal 999 was not approved: no proposal 999."
    assert (store / "a.md").read_bytes() == b"A\n"
    # undo and reject report per id too; a dry run says it would fail for the missing one
    r = run(home, "proposals", "undo", "999", str(a), "--json")
    assert [(x["id"], x["ok"]) for x in json.loads(r.stdout)["results"]] == [(999, False), (a, True)]
    r = run(home, "proposals", "reject", "998", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["results"][0]["message"] == "no proposal 998"
    r = run(home, "proposals", "approve", "997", "--dry-run", "--json")
    assert json.loads(r.stdout)["results"][0]["would"] == "error"


@pytest.mark.slow
@pytest.mark.parametrize("argv", [("proposals", "list"), ("status",), ("reindex",), ("upkeep",)])
def test_a_corrupt_records_database_is_one_line(tmp_path, argv):
    home, store = tmp_path / "home", tmp_path / "store"
    write(store, "a.md", "---\nname: a\ndescription: a note\n---\nbody\n")
    home.mkdir()
    (home / "geode.db").write_bytes(b"this is not SQLite at all\n" * 200)
    message = one_line_message(run(home, *argv, "--store", str(store)), "records database", "not a database")
    assert str(home / "geode.db") in message  # which file: a person may have several homes


def _absent_driver() -> str:
    for name in ("pg8000", "psycopg2cffi", "asyncpg"):
        if importlib.util.find_spec(name) is None:
            return name
    raise AssertionError("every PostgreSQL driver this test names is installed; name another")


@pytest.mark.parametrize("argv", [("proposals", "list"), ("status",), ("upkeep",)])
def test_a_postgresql_url_without_its_driver_is_one_line(tmp_path, argv):
    driver = _absent_driver()
    store = tmp_path / "store"
    write(store, "a.md", "---\nname: a\ndescription: a note\n---\nbody\n")
    url = f"postgresql+{driver}://geode@127.0.0.1:5432/test"
    r = run(tmp_path / "home", *argv, "--store", str(store), env={"GEODE_DATABASE_URL": url})
    one_line_message(r, driver, "not installed")


@pytest.mark.slow
@pytest.mark.parametrize("argv", [("proposals", "list"), ("status",), ("init",)])
def test_a_read_only_home_is_one_line(argv):
    with tempfile.TemporaryDirectory(prefix="geode-ro-") as top:
        os.chmod(top, 0o755)  # reachable by the unprivileged user
        store, ro = Path(top) / "store", Path(top) / "ro"
        write(store, "a.md", "---\nname: a\ndescription: a note\n---\nbody\n")
        os.chmod(store, 0o755)
        os.chmod(store / "a.md", 0o644)
        ro.mkdir(mode=0o555)
        os.chmod(ro, 0o555)
        user = 65534 if os.geteuid() == 0 else None  # nobody, when the tests run as root
        r = run(ro / "home", *argv, "--store", str(store), user=user)
        one_line_message(r, str(ro / "home"), "ermission denied")
