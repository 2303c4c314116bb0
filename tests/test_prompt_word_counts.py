"""``recall_word``, the per-token note counts the prompt hook's text fallback reads (issue 25):
built by the index refresh, rebuilt when a tenth of the notes changed since, and a word new
since the last build is still found (counted in FTS5, bounded, as before the table)."""

from __future__ import annotations

import sqlite3

import geode.delivery.prompt_recall as pr
from geode.recall.index_tables import WORD_DRIFT, dispose_engines
from geode.recall.search import index_for
from tests.stores import fresh_settings, write


def _note(i: int, extra: str = "") -> str:
    return f"---\ntitle: Note {i}\n---\nThe runner restarts after a lock file goes stale {extra}.\n"


def _counts(settings) -> tuple[dict, dict]:
    conn = sqlite3.connect(settings.records_file)
    try:
        words = dict(conn.execute("SELECT term, docs FROM recall_word").fetchall())
        meta = dict(conn.execute("SELECT k, v FROM recall_meta WHERE k LIKE 'words_%'").fetchall())
        return words, meta
    finally:
        conn.close()


def test_the_counts_follow_the_notes_within_a_tenth(tmp_path):
    root = tmp_path / "notes"
    for i in range(100):
        write(root, f"n{i:03d}.md", _note(i))
    settings = fresh_settings(root, tmp_path / "home")
    try:
        index_for(settings).refresh()
        words, meta = _counts(settings)
        assert words["runner"] == 100 and meta == {"words_notes": "100", "words_touched": "0"}

        assert WORD_DRIFT == 0.1
        for i in range(5):  # 5 of 100 notes changed: the counts stay, the tally grows
            write(root, f"n{i:03d}.md", _note(i, "zeppelin"))
        index_for(settings).refresh()
        words, meta = _counts(settings)
        assert "zeppelin" not in words and meta["words_touched"] == "5"
        hits = pr.text_search(settings, "zeppelin runner")  # a word new since the build: still found
        assert sorted(h["path"] for h in hits) == ["n000.md", "n001.md", "n002.md"]

        for i in range(5, 11):  # 11 of 100 now: rebuilt
            write(root, f"n{i:03d}.md", _note(i, "zeppelin"))
        index_for(settings).refresh()
        words, meta = _counts(settings)
        assert words["zeppelin"] == 11 and meta == {"words_notes": "100", "words_touched": "0"}
    finally:
        dispose_engines()


def test_an_index_without_the_counts_is_still_searched(tmp_path):
    """An index built before the table (or whose build never filled it) answers as before."""
    root = tmp_path / "notes"
    for i in range(20):
        write(root, f"n{i:03d}.md", _note(i, "quasar" if i == 3 else ""))
    settings = fresh_settings(root, tmp_path / "home")
    try:
        index_for(settings).refresh()
        conn = sqlite3.connect(settings.records_file)
        with conn:
            conn.execute("DROP TABLE recall_word")
            conn.execute("DELETE FROM recall_meta WHERE k LIKE 'words_%'")
        conn.close()
        stats: dict = {}
        hits = pr.text_search(settings, "quasar runner", stats=stats)
        assert [h["path"] for h in hits] == ["n003.md"] and stats["looked_up"] == 0
    finally:
        dispose_engines()


def test_a_quick_refresh_adds_its_notes_to_the_tally_and_never_rebuilds(tmp_path):
    """A search's ``quick_refresh`` must say how stale the counts are (``search._counted_over``
    trusts a count only past that margin): it did not, so counts after it looked fresh."""
    import os
    import time

    root = tmp_path / "notes"
    for i in range(20):
        write(root, f"d{i % 2}/n{i:03d}.md", _note(i))
    settings = fresh_settings(root, tmp_path / "home")
    try:
        index_for(settings).refresh()
        assert _counts(settings)[1] == {"words_notes": "20", "words_touched": "0"}
        for i in range(0, 6, 2):  # 3 of 20: past WORD_DRIFT, but a quick refresh never rebuilds
            write(root, f"d0/n{i:03d}.md", _note(i, "zeppelin"))
        later = time.time() + 5  # the folder's mtime must move for quick_refresh to look again
        os.utime(root / "d0", (later, later))
        counts = index_for(settings).quick_refresh()
        assert counts["changed"] == 3, counts
        words, meta = _counts(settings)
        assert meta == {"words_notes": "20", "words_touched": "3"} and "zeppelin" not in words
    finally:
        dispose_engines()
