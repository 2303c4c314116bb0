"""Exact words before prefixes (issue 26): a short query word matches whole words first, so
"cat" does not pull "categorizing" or "catch" above the note about the cat; a prefix only where
no note holds the whole word, and always for a longer word (a stem such as "categoriz").
Real SQLite FTS5 index, text mode (no model needed)."""

from __future__ import annotations

from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import _coverage, index_for, match_units, search, word_forms
from tests.stores import fresh_settings, write

NOTES = {
    # many words starting with "cat" and one mention of the cat: by prefix, these win
    "a/categorizing.md": "# Categorizing tickets\n\nCategorizing, categories and the catalog: catch every "
    "category early, categorize the catalogue, catch the catalog's categories.\n",
    "a/catch.md": "# Catch blocks\n\nA catch block must catch the exception; catch it, catch it again, "
    "categorize what you catch.\n",
    "a/pet.md": "# Pet sitting\n\nThe cat needs food twice a day while we travel.\n",
    "a/pets.md": "# Neighbours\n\nTwo cats live next door.\n",
    "a/login.md": "# Login page\n\nThe login form loses the session cookie.\n",
    "a/zeppelin.md": "# Zeppelin tour\n\nThe zeppelin flies over the lake on Sundays.\n",
}


def _settings(tmp_path):
    for rel, text in NOTES.items():
        write(tmp_path / "store", rel, text)
    s = fresh_settings(tmp_path / "store", tmp_path / "home")
    RecallIndex(s).refresh()
    return s


def test_a_short_word_finds_the_whole_word_before_longer_words_it_prefixes(tmp_path):
    s = _settings(tmp_path)
    try:
        paths = [h["path"] for h in search(s, "cat", mode="text", refresh=False)["results"]]
        # only the notes holding the word (or its plural) are found, the cat first
        assert set(paths) == {"a/pet.md", "a/pets.md"}, paths
        paths = [h["path"] for h in search(s, "where is the cat during travel", mode="text", refresh=False)["results"]]
        assert paths[0] == "a/pet.md", paths
        assert "a/categorizing.md" not in paths and "a/catch.md" not in paths, paths
    finally:
        dispose_engines()


def test_a_prefix_only_where_no_note_holds_the_whole_word_and_for_long_words(tmp_path):
    s = _settings(tmp_path)
    try:
        idx = index_for(s)
        with idx.sql.connect() as conn:
            units = match_units(idx, conn, ["cat", "zep", "categoriz"])
        assert units["cat"] == ["=cat", "=cats"]
        assert units["zep"] == ["zep"]  # no note holds "zep" or its forms: the prefix finds "zeppelin"
        assert units["categoriz"] == ["categoriz"]  # a long word (a stem) stays a prefix
        paths = [h["path"] for h in search(s, "zep", mode="text", refresh=False)["results"]]
        assert paths == ["a/zeppelin.md"]
        paths = [h["path"] for h in search(s, "categorizing", mode="text", refresh=False)["results"]]
        assert paths[:2] == ["a/categorizing.md", "a/catch.md"], paths
    finally:
        dispose_engines()


def test_coverage_counts_a_whole_word_unit_only_where_it_stands_as_a_word():
    row = {"title": "Catch", "description": "", "tags": "[]", "body": "categorizing the catalog"}
    units = {"cat": ["=cat", "=cats"]}
    assert _coverage(["cat"], row, None, units) == 0.0
    assert _coverage(["cat"], {**row, "body": "the cats, again"}, None, units) == 1.0
    assert _coverage(["cat"], row) == 1.0  # without units: a substring, as before
    assert "cats" in word_forms("cat") and "stopped" in word_forms("stop") and "using" in word_forms("use")
