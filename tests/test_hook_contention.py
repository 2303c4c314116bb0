"""32 hook processes at once while another process holds the binding index's write lock.

What broke (issue 22, item 8): a hook that found the index needed a refresh took the index's
write lock within the 40 ms ledger budget; under contention it got "database is locked", the
error went to hook-errors.log and the call delivered nothing and left no ledger row, so the
evidence could not count it. Now a hook that cannot get the lock reads the index as it is (a
snapshot), and a call that cannot read the index at all leaves an ``index_busy`` row.

Real parts only: the installed hook command through ``/bin/sh -c``, 32 at a time, a separate
writer process holding ``BEGIN IMMEDIATE`` on the index file most of the time and adding notes
to the store (so every hook sees a changed folder and wants to refresh).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import Geode

PARALLEL = 32
CALLS_EACH = 8

_HOLDER = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    index, store, hold_s, gap_s = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    conn = sqlite3.connect(index, timeout=30, isolation_level=None)
    n = 0
    print("ready", flush=True)
    while not os.path.exists(os.path.join(store, "..", "stop-holder")):
        conn.execute("BEGIN IMMEDIATE")
        # a new note while the lock is held: the folder's mtime changes, so every hook wants a refresh
        with open(os.path.join(store, f"added-{n}.md"), "w") as fh:
            fh.write("---\\nname: added\\n---\\nplain note\\n")
        n += 1
        time.sleep(hold_s)
        conn.execute("COMMIT")
        time.sleep(gap_s)
    print(n, flush=True)
    """
)


def _store(g: Geode) -> None:
    g.crystal("build.md", "Run the build with --verbose to see the failing step.", match='"npm run build"')
    for i in range(40):
        g.write(f"notes/n{i}.md", f"---\nname: n{i}\n---\nnote {i}\n")
    g.init_db()
    warm = g.bash("npm run build", session="warm")  # builds the index inline (a small store)
    assert "--verbose" in warm.context, warm


def _call(g: Geode, n: int) -> tuple[int, str, int]:
    payload = g.event(
        "PreToolUse",
        session=f"call-{n}",
        tool_name="Bash",
        tool_input={"command": "npm run build", "description": "x"},
        tool_use_id=f"t{n}",
    )
    t = time.perf_counter()
    proc = subprocess.run(
        ["/bin/sh", "-c", g.command()],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=g.env(),
        cwd=g.cwd,
        timeout=60,
    )
    return n, proc.stdout, int((time.perf_counter() - t) * 1000)


@pytest.mark.slow
def test_parallel_hooks_under_a_held_index_lock_deliver_or_say_why(tmp_path):
    from geode.delivery import ledger
    from geode.delivery.index import index_path

    g = Geode(tmp_path)
    _store(g)
    settings = g.settings()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, index_path(settings), str(g.store), "0.25", "0.02"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with ThreadPoolExecutor(PARALLEL) as pool:
            results = list(pool.map(lambda n: _call(g, n), range(PARALLEL * CALLS_EACH)))
    finally:
        (g.home / "stop-holder").write_text("")
        out, _ = holder.communicate(timeout=30)
    assert int(out.strip()) > 5, "the writer held the lock too few times to contend with anything"
    ledger.drain_spool(settings)
    rows = g.rows()
    by_session: dict[str, set[str]] = {}
    for r in rows:
        by_session.setdefault(r["session"], set()).add(r["kind"])
    delivered = {n for n, stdout, _ms in results if "--verbose" in stdout}
    delivered_rows = {n for n in range(len(results)) if "delivered" in by_session.get(f"call-{n}", set())}
    busy = {n for n in range(len(results)) if "index_busy" in by_session.get(f"call-{n}", set())}
    neither = [n for n in range(len(results)) if n not in delivered and n not in busy]
    assert not neither, (
        f"{len(neither)} of {len(results)} calls delivered nothing and left no ledger row saying why; "
        f"hook-errors.log: {g.error_log()[-1500:]}"
    )
    assert delivered <= delivered_rows, "a delivery without its ledger row"
    # the snapshot is the point: most calls deliver even though the lock is held most of the time
    assert len(delivered) >= len(results) * 0.9, (len(delivered), len(busy))
    assert "database is locked" not in g.error_log()


_EXCLUSIVE = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")  # in WAL mode: no other connection may even read
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT OR REPLACE INTO meta VALUES('held', '1')")
    conn.execute("COMMIT")
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def test_a_call_that_cannot_read_the_index_leaves_an_index_busy_row(tmp_path):
    """Another process keeps the index from every reader: each call exits 0 and silent, and
    leaves an ``index_busy`` row (before: a traceback in hook-errors.log and no row at all)."""
    from geode.delivery.index import index_path

    g = Geode(tmp_path)
    _store(g)
    holder = subprocess.Popen(
        [sys.executable, "-c", _EXCLUSIVE, index_path(g.settings())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        results = [g.bash("npm run build", session=f"busy-{i}") for i in range(4)]
    finally:
        holder.communicate("", timeout=30)
    assert all(r.rc == 0 and r.stdout == "" for r in results), results
    busy = g.rows("index_busy")
    assert sorted(r["session"] for r in busy) == [f"busy-{i}" for i in range(4)], g.error_log()[-1500:]
    assert all(r["action"] == "bash" and r["channel"] == "act" for r in busy)
    assert json.loads(busy[0]["detail"])["event"] == "PreToolUse"
    assert g.error_log() == ""
    after = g.bash("npm run build", session="after")  # the holder is gone: delivery resumes
    assert "--verbose" in after.context, after
    from geode.evidence.stats import compute_stats
    from geode.records.models import init_db

    engine = init_db(g.settings())
    try:
        assert compute_stats(g.settings(), engine, 1, 0)["unserved_calls"] == 4  # the evidence counts them
    finally:
        engine.dispose()
