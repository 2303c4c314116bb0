"""Two homes, one store, separate records (issue 22, point 13): each home's scheduler lock lived
in its own GEODE_HOME, so both REAL ``geode scheduler`` processes fired and the night ran twice,
filing two queues. The night is now decided under the store's own lock: one home runs it, the
other's scheduler says it skipped because another home holds the night.

No broker: each scheduler runs the night in-process when it fires (the embedded default), so a
night that ran is a night whose agents filed proposals into that home's queue.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geode.kernel.config import load_settings
from geode.scheduler import nightly
from tests.upkeep_helpers import setup
from tests.workers import stop_group

pytestmark = pytest.mark.slow  # two schedulers and a whole night of the four agents

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _records(home: Path, store: Path):
    from geode.queue import proposals
    from geode.records.models import init_db

    settings = load_settings(home=str(home), store=str(store))
    engine = init_db(settings)
    return settings, engine, proposals


def test_two_homes_on_one_store_run_one_night_into_one_queue(tmp_path):
    settings, _engine, root, _ = setup("obsidian_vault", tmp_path / "a")
    homes = [Path(settings.home), tmp_path / "b" / "home"]
    homes[1].mkdir(parents=True)
    at = dt.datetime.now() + dt.timedelta(seconds=8)
    if at.date() != dt.date.today():  # the trigger would fall tomorrow: wait for midnight
        time.sleep((dt.datetime.combine(at.date(), dt.time()) - dt.datetime.now()).total_seconds() + 1)
        at = dt.datetime.now() + dt.timedelta(seconds=8)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update(GEODE_UPKEEP_AT=at.strftime("%H:%M:%S"), PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    logs = [tmp_path / f"scheduler-{i}.log" for i in range(2)]
    procs = [
        subprocess.Popen(
            [str(BIN / "geode"), "scheduler", "--home", str(home), "--store", str(root)],
            cwd=REPO,
            env=env,
            stdout=open(log, "w"),  # noqa: SIM115 - the scheduler's, closed when it exits
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for home, log in zip(homes, logs, strict=True)
    ]
    run_id = f"night-{at.date().isoformat()}"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not all("fired for" in log.read_text() for log in logs):
            assert all(p.poll() is None for p in procs), "\n".join(log.read_text() for log in logs)
            time.sleep(0.2)
        said = [log.read_text() for log in logs]
        assert all("fired for" in s for s in said), "\n----\n".join(said)
    finally:
        for p in procs:
            stop_group(p)

    nights = [nightly.enqueued_nights(_records(home, root)[0]) for home in homes]
    assert sorted(nights, key=len) == [[], [run_id]], (nights, said)
    ran = 0 if nights[0] else 1
    skipped = 1 - ran
    assert f"fired for {at.strftime('%Y-%m-%d %H:%M:%S')}" in said[ran] and run_id in said[ran], said[ran]
    assert f"skipped {run_id}: another home holds this store's night" in said[skipped], said[skipped]
    assert str(homes[ran].resolve()) in said[skipped]

    _s, engine_ran, proposals = _records(homes[ran], root)
    _s, engine_skipped, _p = _records(homes[skipped], root)
    filed = proposals.list_proposals(engine_ran, run_id=run_id)
    assert filed, "the night that ran filed nothing: the test examined nothing"
    assert proposals.list_proposals(engine_skipped, run_id=run_id) == []  # one queue, not two
    from geode.agents.contract import list_runs

    assert {r["agent"] for r in list_runs(engine_ran) if r["run_id"] == run_id} == {
        "librarian",
        "cleaner",
        "gardener",
        "corrector",
    }
    assert [r for r in list_runs(engine_skipped) if r["run_id"] == run_id] == []

    claim = json.loads((root / nightly.STORE_LOCK_NAME).read_text())
    assert claim["run_id"] == run_id and claim["home"] == str(homes[ran].resolve())


def test_a_store_under_git_keeps_its_scheduler_lock_out_of_git_status(tmp_path):
    """A store that is a git work tree keeps its scheduler lock in ``.git``: a night fired on it
    leaves ``git status`` clean (the store walk skips dot files either way)."""
    settings, _engine, root, _ = setup("skills", tmp_path)
    git = ["git", "-C", str(root), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "store"], check=True)
    assert nightly.store_lock_paths(settings) == [str(root.resolve() / ".git" / "geode-scheduler.lock")]
    now = dt.datetime(2026, 3, 4, 3, 5).timestamp()
    assert nightly.fire(settings.home, str(root), now=now) == "night-2026-03-04"
    assert json.loads((root / ".git" / "geode-scheduler.lock").read_text())["run_id"] == "night-2026-03-04"
    status = subprocess.run(git[:3] + ["status", "--porcelain"], capture_output=True, text=True, check=True)
    assert status.stdout == ""
