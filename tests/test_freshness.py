"""Freshness: every change to the store is seen on the very next hook call.

The hook keeps a binding index; these tests change the files behind its back (as an editor,
git or the agent's own Write tool would) and check that the next call already reflects it.
"""

from __future__ import annotations

import math
import os
import sqlite3

import pytest

from tests.helpers import Geode, crystal_text

CMD = "npm run build | tail -20"


@pytest.fixture()
def g(tmp_path) -> Geode:
    g = Geode(tmp_path)
    g.init_db()
    return g


def _delivered_paths(g: Geode, session: str = "s1") -> list[str]:
    return [r["path"] for r in g.rows("delivered", session=session)]


def _ctx(res) -> str:
    assert res.rc == 0 and res.errors == "", res
    return res.context if res.stdout else ""


def test_edit_in_place_is_delivered_in_its_new_form(g):
    p = g.crystal("pipe.md", "Old advice about pipes.", match='"| tail"')
    assert "Old advice about pipes." in _ctx(g.bash(CMD))
    p.write_text(crystal_text("New, longer advice about pipes: use set -o pipefail.", match='"| tail"'))
    ctx = _ctx(g.bash(CMD))
    assert "New, longer advice about pipes" in ctx and "Old advice" not in ctx


@pytest.mark.parametrize("mtime_shift_ns", [1, 0], ids=["mtime+1ns", "mtime-restored"])
def test_edit_that_keeps_the_size_is_delivered_in_its_new_form(g, mtime_shift_ns):
    p = g.crystal("pipe.md", "Use pipefail: version A.", match='"| tail"')
    assert "version A." in _ctx(g.bash(CMD))
    st = os.stat(p)
    text = p.read_text()
    p.write_text(text.replace("version A.", "version B."))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + mtime_shift_ns))
    assert os.stat(p).st_size == st.st_size
    ctx = _ctx(g.bash(CMD))
    assert "version B." in ctx and "version A." not in ctx
    hashes = [r["content_hash"] for r in g.rows("delivered")]
    assert len(hashes) == 2 and hashes[0] != hashes[1]


def test_match_edited_away_stops_firing_at_the_next_call(g):
    p = g.crystal("pipe.md", "Pipe advice.", match='"| tail"')
    assert "Pipe advice." in _ctx(g.bash(CMD))
    p.write_text(crystal_text("Pipe advice.", match='"docker build"'))
    assert _ctx(g.bash(CMD)) == ""
    assert "Pipe advice." in _ctx(g.bash("docker build ."))


def test_same_size_match_edit_stops_firing_at_the_next_call(g):
    p = g.crystal("pipe.md", "Pipe advice.", match='"| tail"')
    assert "Pipe advice." in _ctx(g.bash(CMD))
    st = os.stat(p)
    p.write_text(p.read_text().replace('"| tail"', '"| tall"'))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert os.stat(p).st_size == st.st_size
    assert _ctx(g.bash(CMD)) == ""
    assert "Pipe advice." in _ctx(g.bash("ls | tall"))


def test_new_crystal_fires_on_the_next_call(g):
    g.crystal("other.md", "Unrelated.", match='"kubectl"')
    assert _ctx(g.bash(CMD)) == ""
    g.crystal("pipe.md", "Fresh pipe advice.", match='"| tail"')
    assert "Fresh pipe advice." in _ctx(g.bash(CMD))
    g.crystal("new/folder/deep.md", "Deep new advice.", match='"| tail"')
    ctx = _ctx(g.bash(CMD))
    assert "Deep new advice." in ctx and "Fresh pipe advice." in ctx


def test_deleted_crystal_stops_firing(g):
    p = g.crystal("pipe.md", "Doomed advice.", match='"| tail"')
    g.crystal("sub/kept.md", "Kept advice.", match='"| tail"')
    assert "Doomed advice." in _ctx(g.bash(CMD))
    p.unlink()
    ctx = _ctx(g.bash(CMD))
    assert "Doomed advice." not in ctx and "Kept advice." in ctx
    (g.store / "sub" / "kept.md").unlink()
    (g.store / "sub").rmdir()
    assert _ctx(g.bash(CMD)) == ""


def test_renamed_crystal_fires_under_its_new_path(g):
    p = g.crystal("old-name.md", "Renamed advice.", match='"| tail"')
    assert "main/old-name.md" in _ctx(g.bash(CMD))
    p.rename(g.store / "new-name.md")
    ctx = _ctx(g.bash(CMD))
    assert "main/new-name.md" in ctx and "old-name" not in ctx
    (g.store / "moved").mkdir()
    (g.store / "new-name.md").rename(g.store / "moved" / "final.md")
    ctx = _ctx(g.bash(CMD))
    assert "main/moved/final.md" in ctx and "new-name" not in ctx
    assert [r["crystal_id"] for r in g.rows("delivered")] == [
        "main:old-name.md",
        "main:new-name.md",
        "main:moved/final.md",
    ]


# -- stores larger than one sweep -------------------------------------------------------------


def _index(g: Geode) -> sqlite3.Connection:
    paths = list((g.home / "index").glob("bindings-*.sqlite"))
    assert len(paths) == 1, paths
    return sqlite3.connect(paths[0])


def _just_swept(g: Geode) -> str:
    """The file the last sweep slice ended on: the last one the sweep will come back to."""
    conn = _index(g)
    try:
        cursor = int(conn.execute("SELECT v FROM meta WHERE k='cursor'").fetchone()[0])
        row = conn.execute("SELECT path FROM files WHERE rowid = ?", (cursor,)).fetchone()
        assert row is not None
        return row[0]
    finally:
        conn.close()


def _big_store(g: Geode, n: int = 200) -> None:
    g.config("[delivery]\nsweep_files = 50\n")
    for i in range(n):
        g.crystal(f"many/c{i:03d}.md", f"Crystal number {i}.", match=f'"zz-never-{i:03d}"')


def test_in_place_binding_edit_in_a_big_store_fires_within_one_full_sweep(g):
    _big_store(g)
    assert _ctx(g.bash(CMD)) == ""  # builds the index and sweeps the first slice
    rel = _just_swept(g)
    p = g.store / rel
    dir_mtime = os.stat(p.parent).st_mtime_ns
    p.write_text(crystal_text("Edited in place to match.", match='"| tail"'))
    assert os.stat(p.parent).st_mtime_ns == dir_mtime  # only the sweep can see this edit
    calls = math.ceil(200 / 50)
    fired_at = None
    for call in range(1, calls + 1):
        if "Edited in place to match." in _ctx(g.bash(CMD)):
            fired_at = call
            break
    assert fired_at is not None, f"an in-place edit to {rel} did not fire within {calls} calls"


def test_edit_through_the_agents_write_tool_fires_on_the_next_call(g):
    _big_store(g)
    assert _ctx(g.bash(CMD)) == ""
    rel = _just_swept(g)  # the sweep will not come back to it for several calls
    p = g.store / rel
    new_text = crystal_text("Written by the agent's Write tool.", match='"| tail"')
    res = g.tool("Write", {"file_path": str(p), "content": new_text})
    assert res.rc == 0 and res.errors == "", res
    p.write_text(new_text)  # the tool runs after its PreToolUse hook
    assert "Written by the agent's Write tool." in _ctx(g.bash(CMD))


def test_write_tool_edit_through_a_symlinked_store_path_fires_on_the_next_call(g, tmp_path):
    """The agent may name the store through a symlink (macOS /tmp, a linked home): still the store."""
    _big_store(g)
    link = tmp_path / "store-link"
    os.symlink(g.store, link)
    assert _ctx(g.bash(CMD)) == ""
    rel = _just_swept(g)
    new_text = crystal_text("Written through the link.", match='"| tail"')
    res = g.tool("Write", {"file_path": str(link / rel), "content": new_text})
    assert res.rc == 0 and res.errors == "", res
    (link / rel).write_text(new_text)
    assert "Written through the link." in _ctx(g.bash(CMD))


def test_folder_names_with_like_wildcards_are_kept_apart(g):
    g.crystal("a_b/x.md", "Underscore folder note.", match='"| tail"')
    g.crystal("axb/y.md", "Lookalike folder note.", match='"| tail"')
    g.crystal("p%q/z.md", "Percent folder note.", match='"| tail"')
    ctx = _ctx(g.bash(CMD))
    assert "Underscore folder note." in ctx and "Lookalike folder note." in ctx and "Percent folder note." in ctx
    for name in ("a_b/x.md",):
        (g.store / name).unlink()
    (g.store / "a_b").rmdir()
    ctx = _ctx(g.bash(CMD))
    assert "Underscore folder note." not in ctx
    assert "Lookalike folder note." in ctx and "Percent folder note." in ctx


def test_renamed_folder_moves_its_crystals(g):
    g.crystal("team/one.md", "Team note one.", match='"| tail"')
    g.crystal("team/deeper/two.md", "Team note two.", match='"| tail"')
    assert "main/team/deeper/two.md" in _ctx(g.bash(CMD))
    (g.store / "team").rename(g.store / "squad")
    ctx = _ctx(g.bash(CMD))
    assert "main/squad/one.md" in ctx and "main/squad/deeper/two.md" in ctx and "main/team/" not in ctx


@pytest.mark.parametrize("damage", ["garbage", "stale-copy", "missing"])
def test_a_damaged_folder_list_never_hides_a_new_crystal(g, damage):
    """The hook reads its folder list from a marshal copy of the index's ``dirs`` table; a
    truncated, stale or missing copy must cost a rescan at most, never a missed file."""
    g.crystal("a/first.md", "First advice.", match='"| tail"')
    assert "First advice." in _ctx(g.bash(CMD))
    (blob,) = list((g.home / "index").glob("bindings-*.sqlite.dirs"))
    old = blob.read_bytes()
    g.crystal("a/second.md", "Second advice.", match='"| tail"')
    assert "Second advice." in _ctx(g.bash(CMD))  # the copy is rewritten after the rescan
    assert blob.read_bytes() != old
    if damage == "garbage":
        blob.write_bytes(b"\x00not marshal")
    elif damage == "stale-copy":
        blob.write_bytes(old)  # from before a/second.md existed
    else:
        blob.unlink()
    g.crystal("a/third.md", "Third advice.", match='"| tail"')
    g.crystal("b/fourth.md", "Fourth advice.", match='"| tail"')
    ctx = _ctx(g.bash(CMD))
    for text in ("First", "Second", "Third", "Fourth"):
        assert f"{text} advice." in ctx


def test_a_new_crystal_in_a_store_of_many_folders_fires_within_one_folder_rotation(g):
    """Beyond ``sweep_folders`` folders the per-call folder check rotates (so a call costs the
    same at 10,000 and 100,000 crystals); a file created behind the hook's back then fires
    within ceil(folders / sweep_folders) calls, and one the agent writes itself at once."""
    g.config("[delivery]\nsweep_folders = 10\n")
    for i in range(40):
        g.write(f"f{i:02d}/note.md", "---\nname: n\n---\nplain\n")
    assert _ctx(g.bash(CMD)) == ""  # builds the index: 41 folders
    g.crystal("f37/new.md", "Rotated advice.", match='"| tail"')
    calls = 0
    while True:
        calls += 1
        if "Rotated advice." in _ctx(g.bash(CMD)):
            break
        assert calls < 5, "not seen within ceil(41 / 10) = 5 calls"
    # the rotation itself: each call checks at most 10 folders and the root, 5 calls cover all 41
    from geode.delivery.index import Index

    seen: set = set()
    for _ in range(5):
        idx = Index(g.settings())
        chosen = idx._folders_to_check()
        idx.close()  # commits the cursor, as a hook call does
        assert len(chosen) <= 11
        seen.update(r[1] for r in chosen)
    assert len(seen) == 41
    # written through the agent's own Write tool: seen on the next call, whatever the rotation
    target = g.store / "f03" / "written.md"
    g.tool("Write", {"file_path": str(target), "content": "x"})
    target.write_text(crystal_text("Written advice.", match='"| tail"'))
    assert "Written advice." in _ctx(g.bash(CMD))
