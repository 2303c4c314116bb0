"""Two homes on one records database and one store (issue 15, point 2), with real processes and
a real PostgreSQL (and a shared SQLite file).

Homes PA and PB share ``GEODE_DATABASE_URL`` and the store. PA approves a 22-file archive
proposal; its apply is held at its middle file (the apply loop's test seam, set by
``tests/apply_seam.py``: deterministic, no sleep decides the interleaving). Meanwhile PB runs ``geode proposals
list`` and ``geode proposals reconcile``. Before journal entries had an owner and a liveness
lock, PB took PA's open entry for a crash's leftover and finished or rolled back an apply in
flight (a mixed store, status ``conflict``). Now PB must leave it alone; only once PA is dead
(killed at the same point) does PB's reconcile settle it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from geode.cli.main import main
from geode.kernel.config import load_settings
from geode.queue import proposals as Q
from tests import apply_seam, archive_store
from tests.conftest import PG_ADMIN
from tests.stores import NO_BACKGROUND_BUILD, snapshot

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("GEODE_SOAK_RUNS") or 20)  # CI: 20 races; bench/soak_two_homes.sh: more


@pytest.fixture(scope="module")
def shared_pg():
    """One PostgreSQL database for the module's races (each race files into its own store)."""
    import psycopg

    name = "geode_shared_" + os.urandom(6).hex()
    admin = psycopg.connect(PG_ADMIN, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _settings(home: Path, store: Path, url: str):
    return load_settings(home=home, store=store, env={"GEODE_DATABASE_URL": url})


def _start_pa(base: Path, store: Path, url: str, pid: int, gate: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update(
        {
            "GEODE_HOME": str(base / "PA"),
            "GEODE_DATABASE_URL": url,
            "PYTHONPATH": str(ROOT),
            "USER": "pa",
        }
    )
    return subprocess.Popen(
        apply_seam.command("proposals", "approve", str(pid), "--store", str(store), "--json", pause=0.002, gate=gate),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_reached(gate: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not Path(str(gate) + ".reached").exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"PA ended before reaching the middle of its apply: {proc.returncode}\n{out}\n{err}")
        assert time.monotonic() < deadline, "PA never reached the middle of its apply"
        time.sleep(0.005)


def _pb(monkeypatch, capsys, base: Path, store: Path, url: str, *argv: str) -> dict:
    """``geode <argv> --store S --json`` as home PB, in this process (another process than PA)."""
    monkeypatch.setenv("GEODE_HOME", str(base / "PB"))
    monkeypatch.setenv("GEODE_DATABASE_URL", url)
    capsys.readouterr()
    code = main([*argv, "--store", str(store), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    return json.loads(out)


def _race(tmp_path, monkeypatch, capsys, url: str) -> None:
    base = tmp_path
    store = base / "S"
    archive_store.make(store)
    before = snapshot(store)
    sa = _settings(base / "PA", store, url)
    engine = Q.open_queue(sa)
    try:
        pid = archive_store.file_archive(sa, engine, "S")
        gate = base / "gate"
        pa = _start_pa(base, store, url, pid, gate)
        try:
            _wait_reached(gate, pa)
            mid = archive_store.states(store, Q.get(engine, pid))
            assert "after" in mid and "before" in mid, mid  # PB looks in the middle of PA's apply
            listed = _pb(monkeypatch, capsys, base, store, url, "proposals", "list")
            assert listed["reconciled"] == []  # nothing said about, nothing done to, PA's apply
            assert {p["id"]: p["status"] for p in listed["proposals"]}[pid] == "pending"
            rec = _pb(monkeypatch, capsys, base, store, url, "proposals", "reconcile")["reconciled"]
            assert [(r["id"], r["outcome"]) for r in rec] == [(pid, "in_progress")], rec
            assert archive_store.states(store, Q.get(engine, pid)) == mid  # PB touched nothing
        finally:
            gate.touch()
            out, err = pa.communicate(timeout=120)
        assert pa.returncode == 0, out + err
        (result,) = json.loads(out)["results"]
        assert result["ok"] and result["status"] == "applied", result
        full = Q.get(engine, pid)
        assert archive_store.states(store, full) == ["after"] * archive_store.FILES  # never mixed
        assert full["status"] == "applied"
        assert [(a["action"], a["outcome"]) for a in full["actions"]] == [("filed", "pending"), ("approve", "applied")]
        assert not list(store.rglob(".geode*"))
        # the records are shared: PB undoes what PA applied, byte for byte
        undone = _pb(monkeypatch, capsys, base, store, url, "proposals", "undo", str(pid))["results"]
        assert [(r["id"], r["status"]) for r in undone] == [(pid, "undone")]
        assert snapshot(store) == before
    finally:
        engine.dispose()


@pytest.mark.services
@pytest.mark.parametrize("run", range(RUNS))
def test_another_homes_reconcile_never_takes_over_a_live_apply_postgresql(
    shared_pg, tmp_path, monkeypatch, capsys, run
):
    _race(tmp_path, monkeypatch, capsys, shared_pg)


@pytest.mark.slow
@pytest.mark.parametrize("run", range(3))
def test_another_homes_reconcile_never_takes_over_a_live_apply_sqlite(tmp_path, monkeypatch, capsys, run):
    _race(tmp_path, monkeypatch, capsys, f"sqlite:///{tmp_path / 'shared.db'}")


@pytest.mark.services
@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_reconcile_settles_the_apply_of_a_home_that_died(shared_pg, tmp_path, monkeypatch, capsys, backend):
    """PA killed (SIGKILL) in the middle of its apply: its lock died with it, so PB's reconcile
    finishes the apply (every file in one of its two states, going forward)."""
    url = shared_pg if backend == "postgresql" else f"sqlite:///{tmp_path / 'shared.db'}"
    store = tmp_path / "S"
    archive_store.make(store)
    sa = _settings(tmp_path / "PA", store, url)
    engine = Q.open_queue(sa)
    try:
        pid = archive_store.file_archive(sa, engine, "S")
        gate = tmp_path / "gate"
        pa = _start_pa(tmp_path, store, url, pid, gate)
        _wait_reached(gate, pa)
        pa.send_signal(signal.SIGKILL)
        pa.communicate(timeout=60)
        deadline = time.monotonic() + 30  # PostgreSQL ends the dead client's session at once
        while True:
            rec = _pb(monkeypatch, capsys, tmp_path, store, url, "proposals", "reconcile")["reconciled"]
            if rec and rec[0]["outcome"] != "in_progress" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert [(r["id"], r["outcome"], r["status"]) for r in rec] == [(pid, "finished", "applied")], rec
        assert archive_store.states(store, Q.get(engine, pid)) == ["after"] * archive_store.FILES
        assert not list(store.rglob(".geode*"))
        assert _pb(monkeypatch, capsys, tmp_path, store, url, "proposals", "reconcile")["reconciled"] == []
    finally:
        engine.dispose()
