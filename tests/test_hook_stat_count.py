"""Issue 25: the act hook ``stat``s only the crystals that can be delivered, not every match.
The real hook command runs in a child process whose ``os.stat`` counts the crystal files it is
asked about (the rotating sweep is turned off, so what is counted is the delivery's own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from geode.delivery import hookmain
from tests.helpers import Geode

MATCHING = 60

_CHILD = r"""
import os, sys
store = sys.argv[1]
seen = []
real = os.stat
def counting(path, *a, **k):
    p = os.fspath(path)
    if isinstance(p, str) and p.startswith(store) and p.endswith(".md"):
        seen.append(p)
    return real(path, *a, **k)
os.stat = counting
sys.path.insert(0, os.path.dirname(sys.argv[2]))
import hookmain
sys.argv = ["hookmain.py", "claude"]
rc = hookmain.main()
sys.stderr.write("STATS " + str(len(seen)) + "\n")
sys.exit(rc)
"""


def _run(g: Geode, command: str, session: str) -> tuple[dict, int]:
    payload = g.event("PreToolUse", session, tool_name="Bash", tool_input={"command": command}, tool_use_id="t")
    proc = subprocess.run(
        [sys.executable, "-S", "-c", _CHILD, str(g.store), hookmain.__file__],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=g.env(),
        cwd=g.cwd,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    stats = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("STATS ")]
    assert stats, proc.stderr
    return (json.loads(proc.stdout) if proc.stdout else {}), stats[0]


def test_only_what_fits_is_statted(tmp_path):
    g = Geode(tmp_path, config="[delivery]\nbudget = 600\nsweep_files = 0\n")
    for i in range(MATCHING):
        g.crystal(f"c{i:02d}.md", f"Note {i}: " + "x" * 150, name=f"note-{i}", match="make")
    g.init_db()
    _run(g, "echo build the index", "warm")  # the first call builds the index
    out, stats = _run(g, "make all", "s1")
    ctx = out["hookSpecificOutput"]["additionalContext"]
    delivered = ctx.count("Note ")
    assert 0 < delivered < MATCHING
    assert stats <= delivered + 2, f"{stats} stat calls on crystals for {delivered} delivered of {MATCHING} matched"


def test_an_edited_crystal_is_still_read_fresh_and_one_unbound_is_dropped(tmp_path):
    g = Geode(tmp_path, config="[delivery]\nbudget = 600\nsweep_files = 0\n")
    for i in range(3):
        g.crystal(f"c{i}.md", f"Old text {i}.", name=f"note-{i}", match="make", salience=0.9 - i / 10)
    g.init_db()
    _run(g, "echo build the index", "warm")
    g.crystal("c0.md", "New text 0, longer now.", name="note-0", match="make", salience=0.9)
    g.crystal("c1.md", "Unbound now.", name="note-1", match="pytest", salience=0.8)
    Path(g.store / "c0.md").touch()
    out, _stats = _run(g, "make all", "s2")
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "New text 0, longer now." in ctx and "Old text 0" not in ctx
    assert "Unbound now." not in ctx and "Old text 1" not in ctx
    assert "Old text 2." in ctx
