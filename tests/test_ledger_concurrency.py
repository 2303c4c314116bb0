"""Many hook processes appending to the ledger at once, and a ledger locked by another process
(every row lands, in the table or through the spool), scaled to a 2-core CI machine, plus the
append/drain race.

Real processes against a real SQLite file. No timing assertions: the workers print how long
their appends took, for the eye only; speed is measured in bench/.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from geode.delivery import ledger
from geode.records import models
from tests.stores import plain_settings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One worker = one hook process doing N appends, each a fresh connection as a real hook would.
WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from geode.delivery import ledger
    from tests.stores import plain_settings

    home, go, wid, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    s = plain_settings(home)
    while not os.path.exists(go):
        time.sleep(0.001)
    where = {"db": 0, "spool": 0}
    worst = 0.0
    for i in range(n):
        ev = ledger.new_event("delivered", session=f"w{wid}", crystal_id=f"main:c{i % 7}",
                              detail=json.dumps({"w": wid, "i": i}))
        t0 = time.perf_counter()
        where[ledger.append(s, [ev])] += 1
        worst = max(worst, time.perf_counter() - t0)
    print(json.dumps({"w": wid, "where": where, "worst_ms": round(worst * 1000, 1)}))
    """
)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _start_workers(home, go, count: int, n: int) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(home), str(go), str(w), str(n)],
            cwd=REPO,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(count)
    ]


def _finish(procs: list[subprocess.Popen]) -> list[dict]:
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert err == "", err  # no uncaught "database is locked", no warnings
        results.append(json.loads(out))
    return results


def _ledger_pairs(path: str) -> list[tuple[int, int]]:
    conn = sqlite3.connect(path)
    try:
        return [tuple(json.loads(d)[k] for k in ("w", "i")) for (d,) in conn.execute("SELECT detail FROM ledger_event")]
    finally:
        conn.close()


@pytest.mark.slow
def test_hook_ledger_concurrency_64_processes(tmp_path):
    """Row 1, scaled: 64 processes x 100 appends = 6,400 events, every one exactly once."""
    procs_n, per = 64, 100
    s = plain_settings(tmp_path)
    models.init_db(s).dispose()
    go = tmp_path / "go"
    procs = _start_workers(tmp_path, go, procs_n, per)
    time.sleep(0.5)  # let them import; a late starter only joins later, it cannot break the test
    go.touch()
    results = _finish(procs)
    to_db = sum(r["where"]["db"] for r in results)
    to_spool = sum(r["where"]["spool"] for r in results)
    assert to_db + to_spool == procs_n * per
    print(
        f"\n{to_db} appends to the db, {to_spool} to the spool; worst append {max(r['worst_ms'] for r in results)} ms"
    )
    ledger.drain_spool(s)
    pairs = _ledger_pairs(s.records_file)
    assert len(pairs) == procs_n * per
    assert sorted(pairs) == [(w, i) for w in range(procs_n) for i in range(per)]  # 0 lost, 0 doubled
    assert ledger.pending_count(s) == 0 and ledger.rejected_count(s) == 0
    conn = sqlite3.connect(s.records_file)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT COUNT(DISTINCT event_id) FROM ledger_event").fetchone()[0] == procs_n * per
    finally:
        conn.close()


HOLDER = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    path, locked, release = sys.argv[1], sys.argv[2], sys.argv[3]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO control_plan (id, rate, stop_units, salt, created_at, source) "
                 "VALUES (99, 0, 0, '', 0, 'holder') ON CONFLICT DO NOTHING")
    open(locked, "w").close()
    while not os.path.exists(release):
        time.sleep(0.01)
    conn.execute("ROLLBACK")
    """
)


@pytest.mark.slow
def test_hook_db_unavailable_spools_and_loses_nothing(tmp_path):
    """Row 2, scaled: a writer holds BEGIN EXCLUSIVE while 16 processes x 25 appends fire.

    The holder keeps the lock until the test releases it after every worker has finished, so
    every append must have met the lock: each returns "spool", nothing raises, every spool line
    parses, and after the release one drain brings all 400 into the ledger.
    """
    s = plain_settings(tmp_path)
    models.init_db(s).dispose()
    locked, release, go = tmp_path / "locked", tmp_path / "release", tmp_path / "go"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, s.records_file, str(locked), str(release)], stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.time() + 60
        while not locked.exists():
            assert holder.poll() is None, holder.stderr.read()
            assert time.time() < deadline, "the lock holder never took its lock"
            time.sleep(0.01)
        procs = _start_workers(tmp_path, go, 16, 25)
        go.touch()
        results = _finish(procs)
    finally:
        release.touch()
        holder.communicate(timeout=60)
    assert holder.returncode == 0
    assert all(r["where"] == {"db": 0, "spool": 25} for r in results)
    print(f"\nworst append while locked: {max(r['worst_ms'] for r in results)} ms")
    with open(ledger.spool_path(s), "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    assert len(lines) == 400
    assert all(line.endswith(b"\n") and json.loads(line)["kind"] == "delivered" for line in lines)
    assert ledger.drain_spool(s) == 400
    assert sorted(_ledger_pairs(s.records_file)) == [(w, i) for w in range(16) for i in range(25)]
    assert ledger.rejected_count(s) == 0


SPOOLER = textwrap.dedent(
    """
    import json, os, sys
    from geode.delivery import ledger
    from tests.stores import plain_settings
    home, wid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = plain_settings(home)
    for i in range(n):
        ledger.spool_append(s, [ledger.new_event("blocked", session=f"w{wid}", detail=json.dumps({"w": wid, "i": i}))])
    """
)

DRAINER = textwrap.dedent(
    """
    import os, sys, time
    from geode.delivery import ledger
    from tests.stores import plain_settings
    home, stop = sys.argv[1], sys.argv[2]
    s = plain_settings(home)
    total = 0
    while not os.path.exists(stop):
        total += ledger.drain_spool(s)
    print(total)
    """
)


@pytest.mark.slow
def test_appenders_racing_drainers_lose_and_double_nothing(tmp_path):
    """Spool appends while two processes drain in a loop: the rename/flock protocol must not
    let a line land in a file that was already read, nor ingest a file twice."""
    s = plain_settings(tmp_path)
    models.init_db(s).dispose()
    stop = tmp_path / "stop"
    drainers = [
        subprocess.Popen(
            [sys.executable, "-c", DRAINER, str(tmp_path), str(stop)],
            cwd=REPO,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    spoolers = [
        subprocess.Popen(
            [sys.executable, "-c", SPOOLER, str(tmp_path), str(w), "600"],
            cwd=REPO,
            env=_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(8)
    ]
    try:
        for p in spoolers:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
    finally:
        stop.touch()
    drained = 0
    for p in drainers:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        drained += int(out)
    drained += ledger.drain_spool(s)
    pairs = _ledger_pairs(s.records_file)
    assert sorted(pairs) == [(w, i) for w in range(8) for i in range(600)]
    assert drained == 4800  # each line ingested by exactly one drain
    assert ledger.pending_count(s) == 0 and ledger.rejected_count(s) == 0
