"""The same proposal approved (or undone) from two homes that share one records database and one
store (issue 22, point 1), with real ``geode`` processes, on PostgreSQL and on one shared SQLite
file.

Before: the home that waited for the store lock had read ``pending`` before the other applied;
once it held the lock it found the new bytes and set the status to ``conflict`` with no condition
on the status it started from: the files applied, the queue saying conflict, undo refused. Now
every status change is a compare-and-set from the status the actor read, and the proposal is
read again under the store's lock: the loser reports the winner's outcome ("already applied by
pa") and writes nothing over it.

The interleaving is forced, not hoped for: home PA's apply is held at its middle file
(the apply loop's seam, set by ``tests/apply_seam.py``, holding the store's lock) until home PB is seen blocked on that lock
in ``/proc/locks``; then PA goes on. A free race (both started at once) follows.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from geode.cli.main import main
from geode.kernel.config import load_settings
from geode.queue import proposals as Q
from tests import apply_seam, archive_store
from tests.stores import NO_BACKGROUND_BUILD, snapshot

ROOT = Path(__file__).resolve().parent.parent


def _geode(
    base: Path, home: str, url: str, store: Path, *argv: str, gate: Path | None = None, pause: str = ""
) -> subprocess.Popen:
    """``geode <argv> --store S --json`` as its own process, in home ``base/home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update({"GEODE_HOME": str(base / home), "GEODE_DATABASE_URL": url, "PYTHONPATH": str(ROOT), "USER": home})
    return subprocess.Popen(
        apply_seam.command(*argv, "--store", str(store), "--json", pause=float(pause) if pause else None, gate=gate),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _blocked_on_a_lock(pid: int) -> bool:
    """Whether process ``pid`` waits for an ``flock`` (a ``->`` line of ``/proc/locks``)."""
    with open("/proc/locks", encoding="ascii") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 5 and parts[1] == "->" and parts[2] == "FLOCK" and parts[5] == str(pid):
                return True
    return False


def _wait(what, proc: subprocess.Popen, why: str) -> None:
    deadline = time.monotonic() + 120
    while not what():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"{why}: the process ended first ({proc.returncode})\n{out}\n{err}")
        assert time.monotonic() < deadline, why
        time.sleep(0.005)


def _result(proc: subprocess.Popen) -> tuple[int, dict]:
    out, err = proc.communicate(timeout=120)
    try:
        (r,) = json.loads(out)["results"]
    except (ValueError, KeyError) as exc:
        raise AssertionError(f"no JSON result ({proc.returncode}): {out}\n{err}") from exc
    return proc.returncode, r


def _world(tmp_path: Path, url: str):
    store = tmp_path / "S"
    archive_store.make(store)
    settings = load_settings(home=tmp_path / "pa", store=store, env={"GEODE_DATABASE_URL": url})
    engine = Q.open_queue(settings)
    pid = archive_store.file_archive(settings, engine, "S")
    return store, engine, pid


def _forced_race(tmp_path: Path, url: str, op: str, monkeypatch, capsys) -> None:
    store, engine, pid = _world(tmp_path, url)
    try:
        before = snapshot(store)
        command = "approve" if op == "apply" else "undo"
        if op == "undo":
            first = _geode(tmp_path, "pa", url, store, "proposals", "approve", str(pid))
            assert _result(first)[1]["status"] == "applied"
        gate = tmp_path / "gate"
        pa = _geode(tmp_path, "pa", url, store, "proposals", command, str(pid), gate=gate)
        try:
            _wait(lambda: Path(f"{gate}.reached").exists(), pa, "PA never reached the middle of its apply")
            pb = _geode(tmp_path, "pb", url, store, "proposals", command, str(pid))
            _wait(lambda: _blocked_on_a_lock(pb.pid), pb, "PB never waited for the store's lock")
        finally:
            gate.touch()
        (code_a, ra), (code_b, rb) = _result(pa), _result(pb)
        done = "applied" if op == "apply" else "undone"
        assert (code_a, ra["ok"], ra["status"]) == (0, True, done), ra  # exactly one applies ...
        assert (code_b, rb["ok"], rb["status"]) == (1, False, done), rb  # ... the other reports it
        assert f"already {done} by pa" in rb["message"], rb["message"]
        full = Q.get(engine, pid)
        assert full["status"] == done
        want = ["after" if op == "apply" else "before"] * archive_store.FILES
        assert archive_store.states(store, full) == want
        assert [(a["action"], a["outcome"], a["who"]) for a in full["actions"]][-2:] == [
            (command, done, "pa"),
            (command, "refused", "pb"),
        ]
        assert not list(store.rglob(".geode*"))
        # PB, in this process, undoes (or applies again) what PA did: the records agree with the files
        monkeypatch.setenv("GEODE_HOME", str(tmp_path / "pb"))
        monkeypatch.setenv("GEODE_DATABASE_URL", url)
        capsys.readouterr()
        then = "undo" if op == "apply" else "approve"
        assert main(["proposals", then, str(pid), "--store", str(store), "--json"]) == 0
        (r,) = json.loads(capsys.readouterr().out)["results"]
        assert r["status"] == ("undone" if op == "apply" else "applied"), r
        if op == "apply":
            assert snapshot(store) == before
    finally:
        engine.dispose()


@pytest.mark.services
@pytest.mark.parametrize("op", ["apply", "undo"])
def test_two_homes_on_one_postgresql_approve_the_same_proposal(pg_url, tmp_path, monkeypatch, capsys, op):
    _forced_race(tmp_path, pg_url, op, monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("op", ["apply", "undo"])
def test_two_homes_on_one_sqlite_file_approve_the_same_proposal(tmp_path, monkeypatch, capsys, op):
    _forced_race(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}", op, monkeypatch, capsys)


def _free_race(tmp_path: Path, url: str) -> None:
    """Both homes started at once (each apply slowed to ~2 ms a file): whoever wins, one applies
    and the other says it is applied; never ``conflict`` over applied files."""
    store, engine, pid = _world(tmp_path, url)
    try:
        procs = [_geode(tmp_path, h, url, store, "proposals", "approve", str(pid), pause="0.002") for h in ("pa", "pb")]
        results = [_result(p)[1] for p in procs]
        assert sorted(r["ok"] for r in results) == [False, True], results
        assert [r["status"] for r in results] == ["applied", "applied"], results
        loser = next(r for r in results if not r["ok"])
        assert "applied" in loser["message"], loser
        assert Q.get(engine, pid)["status"] == "applied"
        assert archive_store.states(store, Q.get(engine, pid)) == ["after"] * archive_store.FILES
    finally:
        engine.dispose()


@pytest.mark.services
@pytest.mark.parametrize("run", range(3))
def test_two_homes_on_one_postgresql_race_freely(pg_url, tmp_path, run):
    _free_race(tmp_path, pg_url)


@pytest.mark.slow
@pytest.mark.parametrize("run", range(3))
def test_two_homes_on_one_sqlite_file_race_freely(tmp_path, run):
    _free_race(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}")


def test_the_home_that_waited_for_the_store_lock_reports_the_winner_fast_lane(tmp_path, monkeypatch):
    """The forced race above in one process, for the fast lane: home PB's approve has read
    ``pending``; when it asks for the store's lock, home PA (its own settings and engine on the
    same SQLite file) applies the proposal first. PB reports it, never ``conflict``."""
    from geode.queue import apply as A

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    store, engine_a, pid = _world(tmp_path, url)
    sa = load_settings(home=tmp_path / "pa", store=store, env={"GEODE_DATABASE_URL": url})
    sb = load_settings(home=tmp_path / "pb", store=store, env={"GEODE_DATABASE_URL": url})
    engine_b = Q.open_queue(sb)
    real_lock = A.store_lock
    first: list[dict] = []

    def lock_after_another_home_applied(*args, **kw):
        if not first:
            first.append({})
            first[0] = A.approve(sa, engine_a, pid, "pa")
        return real_lock(*args, **kw)

    monkeypatch.setattr(A, "store_lock", lock_after_another_home_applied)
    try:
        r = A.approve(sb, engine_b, pid, "pb")
        assert first[0]["ok"] and first[0]["status"] == "applied", first
        assert not r["ok"] and r["status"] == "applied", r
        assert "already applied by pa" in r["message"], r["message"]
        assert Q.get(engine_a, pid)["status"] == "applied"
        monkeypatch.setattr(A, "store_lock", real_lock)
        assert A.undo(sb, engine_b, pid, "pb")["status"] == "undone"
    finally:
        engine_b.dispose()
        engine_a.dispose()


@pytest.mark.services
def test_a_reject_that_read_pending_never_overwrites_an_apply_another_home_finished(pg_url, tmp_path, monkeypatch):
    """PostgreSQL (READ COMMITTED): home PB's reject reads ``pending``; before it writes, home PA
    (its own settings, engine and connection) applies the proposal and commits. The reject's
    write is a compare-and-set from ``pending``: it loses, says who applied it, and the proposal
    stays applied (before, it was set ``rejected`` over applied files)."""
    from geode.queue import apply as A
    from geode.queue import review

    store, engine_a, pid = _world(tmp_path, pg_url)
    sb = load_settings(home=tmp_path / "pb", store=store, env={"GEODE_DATABASE_URL": pg_url})
    engine_b = Q.open_queue(sb)
    sa = load_settings(home=tmp_path / "pa", store=store, env={"GEODE_DATABASE_URL": pg_url})
    real_load = review.load
    applied: list[dict] = []

    def load_then_another_home_applies(conn, proposal_id):
        out = real_load(conn, proposal_id)
        if not applied:
            applied.append(A.approve(sa, engine_a, proposal_id, "pa"))
        return out

    monkeypatch.setattr(review, "load", load_then_another_home_applies)
    try:
        r = review.reject(sb, engine_b, pid, "pb", "not wanted")
        assert applied and applied[0]["status"] == "applied", applied
        assert not r["ok"] and r["status"] == "applied", r
        assert "already applied by pa" in r["message"], r["message"]
        full = Q.get(engine_a, pid)
        assert full["status"] == "applied"
        assert [(a["action"], a["outcome"]) for a in full["actions"]][-2:] == [
            ("approve", "applied"),
            ("reject", "refused"),
        ]
        assert A.undo(sa, engine_a, pid, "pa")["status"] == "undone"
    finally:
        engine_b.dispose()
        engine_a.dispose()
