"""The services lane's guard (``tests/conftest.py``): an unmarked test that reaches PostgreSQL
or Redis fails and names the marker; a marked one is let through, and ``-m "not services"``
leaves it out. Run as a pytest of its own over a generated file, so that nothing here needs a
service: the guard refuses before any connection is tried."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES = """
import socket

import pytest


def test_unmarked_psycopg():
    import psycopg

    psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=test")


def test_unmarked_redis_caught_by_the_code():
    try:  # code under test that swallows what it gets is still failed, at teardown
        socket.create_connection(("127.0.0.1", 6379), timeout=1)
    except BaseException:
        pass


def test_unmarked_worker():
    import subprocess

    subprocess.run(["celery", "--version"], env={"GEODE_BROKER_URL": "redis://127.0.0.1:6379/0"})


def test_plain():
    assert sum(range(4)) == 6


@pytest.mark.services
def test_marked():
    assert True
"""


def _pytest(tmp_path: Path, *args: str) -> str:
    (tmp_path / "test_cases.py").write_text(CASES, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    argv += ["--rootdir", str(tmp_path), "-o", "markers=services", str(tmp_path / "test_cases.py"), *args]
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return run.stdout + run.stderr


def test_an_unmarked_test_that_reaches_a_service_fails_and_names_the_marker(tmp_path):
    out = _pytest(tmp_path, "-m", "not services")
    # the one whose code swallowed the failure passes its call and errs at its teardown
    assert "2 failed, 2 passed, 1 deselected, 1 error" in out, out
    assert "uses PostgreSQL (psycopg.connect) but is not marked @pytest.mark.services" in out, out
    assert "uses Redis (a connection to 127.0.0.1:6379)" in out, out
    assert "uses Redis (a child process given 127.0.0.1:6379)" in out, out
    assert 'the fast lane `pytest -m "not services"` leaves it out' in out, out


def test_a_marked_test_is_let_through(tmp_path):
    out = _pytest(tmp_path, "-k", "test_marked or test_plain")
    assert "2 passed, 3 deselected" in out, out
