"""A search's folder check keeps the recorded folder mtimes in memory (issue 10, speed): every
change to the files must still be seen by the next search, including changes another process
indexed meanwhile (its writes to ``recall_dir`` make this process read the table again)."""

from __future__ import annotations

import os
import shutil

from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import index_for, search
from tests.stores import fresh_settings, write


def _paths(settings, q: str) -> list[str]:
    return [h["path"] for h in search(settings, q, mode="text")["results"]]


def _bump(path) -> None:
    """Move a folder's mtime on, as a second write in the same tick of a coarse clock would not."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 7_000_000))


def test_every_change_is_seen_by_the_next_search_with_the_folder_cache(tmp_path):
    root = tmp_path / "notes"
    for i in range(30):
        write(root, f"a/b{i % 3}/n{i:02d}.md", f"---\ntitle: note {i}\n---\nfiller text number {i}\n")
    settings = fresh_settings(root, tmp_path / "home")
    try:
        idx = index_for(settings)
        idx.refresh()
        assert _paths(settings, "zeppelin") == []
        assert "_dirs_cache" in idx.__dict__  # the folder list is held in memory from now on

        write(root, "a/b1/zep.md", "---\ntitle: zeppelin\n---\nthe airship docks\n")  # new file
        _bump(root / "a" / "b1")
        assert _paths(settings, "zeppelin") == ["a/b1/zep.md"]

        write(root, "a/new/deep/quasar.md", "---\ntitle: quasar\n---\nfar away\n")  # new folders
        _bump(root / "a")
        assert _paths(settings, "quasar") == ["a/new/deep/quasar.md"]

        # an edit saved by rename (the folder's mtime moves): the new text is found
        tmp = root / "a" / "b1" / ".zep.tmp"
        tmp.write_text("---\ntitle: zeppelin\n---\nthe airship moors at the mast\n")
        os.replace(tmp, root / "a" / "b1" / "zep.md")
        _bump(root / "a" / "b1")
        assert _paths(settings, "moors") == ["a/b1/zep.md"]

        # another process indexes a change (its own RecallIndex writes recall_dir), then this one
        # searches: the table moved, so this process reads it again and stays correct
        write(root, "a/b2/gizmo.md", "---\ntitle: gizmo\n---\na gizmo note\n")
        _bump(root / "a" / "b2")
        other = RecallIndex(settings)
        assert other.quick_refresh()["added"] == 1
        # this process reads the moved table again: nothing looks changed, nothing is listed
        assert idx.quick_refresh()["files"] == 0
        write(root, "a/b2/gizmo2.md", "---\ntitle: gizmo two\n---\nanother gizmo note\n")
        _bump(root / "a" / "b2")
        assert sorted(_paths(settings, "gizmo")) == ["a/b2/gizmo.md", "a/b2/gizmo2.md"]

        shutil.rmtree(root / "a" / "new")  # a folder removed: its notes go
        _bump(root / "a")
        assert _paths(settings, "quasar") == []

        (root / "a" / "b1" / "zep.md").unlink()  # a file removed
        _bump(root / "a" / "b1")
        assert _paths(settings, "zeppelin") == []
    finally:
        dispose_engines()
