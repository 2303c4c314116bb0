"""A store nested 1,100 folders deep (issue 15, point 5): Python 3.11's ``os.walk`` recursed once
per level, so init, lint, doctor, upkeep, reindex and status raised ``RecursionError`` and the
hook delivered nothing from the whole store. Now every walk is a loop (``store.walk``, the hook
index's ``_scan_dir``): each command runs, the deep note is seen, and the hook still delivers
from the rest of the store. Real processes, a real GEODE_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from geode.kernel.store import iter_note_paths, walk
from tests.helpers import Geode

ROOT = Path(__file__).resolve().parent.parent
DEPTH = 1100


_made: list[str] = []


def _deep(root: Path) -> str:
    """``d/d/.../d/deep.md``, 1,100 folders down, made one ``mkdir`` at a time (``os.makedirs``
    itself recurses once per level)."""
    p = str(root)
    _made.append(os.path.join(p, "d"))
    for _ in range(DEPTH):
        p = os.path.join(p, "d")
        os.mkdir(p)
    with open(os.path.join(p, "deep.md"), "w", encoding="utf-8") as fh:
        fh.write("---\nname: deep\ndescription: a note at the bottom of the store\n---\nbody\n")
    return "/".join(["d"] * DEPTH + ["deep.md"])


@pytest.fixture(autouse=True)
def _remove_deep_trees():
    """Remove the deep trees bottom-up with a loop: pytest's clean-up of old temporary folders
    (``shutil.rmtree``, recursive in 3.11) would otherwise raise ``RecursionError`` at the end of
    a later session."""
    yield
    while _made:
        top = _made.pop()
        chain = [top]
        while os.path.isdir(os.path.join(chain[-1], "d")):
            chain.append(os.path.join(chain[-1], "d"))
        for folder in reversed(chain):
            for name in os.listdir(folder):
                os.unlink(os.path.join(folder, name))
            os.rmdir(folder)


@pytest.fixture()
def g(tmp_path) -> Geode:
    g = Geode(tmp_path)
    g.crystal("pipe.md", "Use set -o pipefail.", name="pipe", match="| tail")
    assert g.store is not None
    g.deep = _deep(g.store)  # type: ignore[attr-defined]
    g.init_db()
    return g


def test_has_notes_is_a_loop_that_finds_a_note_1100_folders_down(tmp_path):
    """``geode run`` and ``init`` ask whether a store holds any note (was ``any(rglob("*.md"))``,
    recursive): the store's walk answers, from the bottom of a 1,100-deep store too."""
    from geode.kernel.store import has_notes

    (tmp_path / "S").mkdir()
    assert has_notes(tmp_path / "S") is False
    _deep(tmp_path / "S")
    assert has_notes(tmp_path / "S") is True


def test_the_walk_reaches_the_bottom_and_keeps_os_walks_order(tmp_path):
    deep = _deep(tmp_path)
    for rel in ("a/x.md", "a/b/y.md", "c/z.md", "top.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    paths = list(iter_note_paths(tmp_path))
    assert deep in paths and len(paths) == 5
    shallow = tmp_path / "a"
    assert [(p, sorted(d), sorted(f)) for p, d, f in walk(shallow)] == [
        (p, sorted(d), sorted(f)) for p, d, f in os.walk(shallow)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("argv", [("init",), ("lint",), ("doctor",), ("upkeep",), ("reindex",), ("status",)])
def test_every_command_runs_on_a_store_nested_1100_deep(g, argv):
    env = g.env()
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, "-m", "geode", *argv, "--store", str(g.store)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    out = r.stdout + r.stderr
    assert "RecursionError" not in out and "Traceback" not in out, out[-3000:]
    if argv == ("lint",):
        assert r.returncode == 0 and "examined 2 notes" in out, out


def test_the_hook_still_delivers_from_the_rest_of_the_store(g):
    res = g.bash("npm test | tail -5")
    assert res.rc == 0 and res.errors == "", res
    assert "Use set -o pipefail." in res.json["hookSpecificOutput"]["additionalContext"]
