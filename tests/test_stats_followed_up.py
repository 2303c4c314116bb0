"""`geode stats` counts the ``followed_up`` ledger kind (issue 24's remainder): a cut note's
pointer that the agent followed is evidence the pointer worked, neither a lookup nor silence, so
the CLI's table and ``--json`` say how many there were. Driven through the real hook command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import Geode

ROOT = Path(__file__).resolve().parents[1]


def _follow_a_cut_pointer(g: Geode, session: str) -> None:
    ctx = g.run("SessionStart", source="startup", session=session).context
    m = re.search(r"full note: ([^\]]+)\]", ctx)
    assert m, ctx
    res = g.tool("Read", {"file_path": m.group(1)}, session=session)
    assert res.rc == 0 and res.stdout == "", res


def test_stats_counts_and_shows_follow_ups(tmp_path):
    g = Geode(tmp_path)
    g.init_db()
    g.crystal("boot-long.md", "Deploys go through the release train. " * 20, name="train", deliver="boot", on=None)
    _follow_a_cut_pointer(g, "s1")
    _follow_a_cut_pointer(g, "s2")
    assert len(g.rows("followed_up")) == 2 and g.rows("blocked") == []

    env = g.env() | {"PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "geode", "stats"]
    d = json.loads(subprocess.run([*run, "--json"], env=env, capture_output=True, text=True, check=True).stdout)
    assert d["followed_up"] == 2
    assert d["blocked_lookups"] == 0 and d["marked_lookups"] == 0  # a follow-up is no lookup
    text = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    [line] = [x for x in text.splitlines() if x.startswith("follow-ups")]
    assert re.search(r"follow-ups \(full note read after a cut\)\s+2\s", line), line
