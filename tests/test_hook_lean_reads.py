"""What a PreToolUse call reads and loads on a large store, held to what it needs (issue 25).

The act hook on a command matching 240 of 100,000 crystals cost more than the same call on
10,000: the matched rows were joined to ``files`` for their mtimes (240 more leaf pages of a
larger table), a two-word term keyed by one word came back for every command holding that word
(``docker push`` for ``git push``: 820 rows at 100,000, each rejected in Python), and the hook
loaded modules it did not use. Each test here fails on the code before that change; the speed
itself is measured in bench/hook_newsession.py, never asserted.
"""

from __future__ import annotations

import json
import sqlite3
import zlib

from geode.delivery import index as index_module
from geode.delivery import ledger
from geode.delivery.index import Index, index_path
from geode.kernel import fastjson
from tests.helpers import Geode


def _store(g: Geode, near: int = 30) -> None:
    for i in range(near):
        g.crystal(f"near/d{i:02d}.md", f"Docker push note {i}.", name=f"docker-{i}", match='"docker push"')
    for i in range(3):
        g.crystal(f"hit/g{i}.md", f"Git push note {i}.", name=f"git-{i}", match='"git push"')


def _prefilter_rows(g: Geode, command: str) -> list[int]:
    """The crystal ids of the rows the binding index's SQL prefilter hands to Python."""
    idx = Index(g.settings())
    rows: list[int] = []
    try:
        real = idx.conn

        class Counting:
            def __getattr__(self, name):
                return getattr(real, name)

            def execute(self, sql, *args):
                cur = real.execute(sql, *args)
                if "FROM grams" in sql:
                    found = cur.fetchall()
                    rows.extend(r[0] for r in found)
                    return _Rows(found)
                return cur

        idx.conn = Counting()  # type: ignore[assignment]
        got = idx.candidates(("bash",), command)
    finally:
        idx.conn = real
        idx.close()
    assert got, "the command matched nothing: the check checks nothing"
    return rows


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def fetchall(self):
        return self.rows


def test_a_two_word_term_is_not_a_candidate_for_a_command_holding_one_of_its_words(tmp_path):
    g = Geode(tmp_path)
    _store(g)
    g.init_db()
    assert "Git push note" in g.bash("git push origin main").context  # builds the index
    rows = _prefilter_rows(g, "git push origin main")
    crystals = set(rows)
    assert len(crystals) == 3, f"{len(crystals)} crystals past the prefilter for 3 matches: `docker push` came back"
    # and the term still fires where it should, through the real hook
    ctx = g.bash("docker push registry/app:1", session="s2").context
    assert "Docker push note" in ctx
    assert "Docker push note" in g.bash("sudo docker -H tcp://x push img", session="s3").context


def test_the_rows_of_the_matches_are_read_without_a_join(tmp_path):
    g = Geode(tmp_path)
    _store(g, near=2)
    g.init_db()
    assert g.bash("git push").context  # builds the index
    idx = Index(g.settings())
    sql: list[str] = []
    try:
        idx.conn.set_trace_callback(sql.append)
        got = idx.candidates(("bash",), "git push origin main")
    finally:
        idx.close()
    assert len(got) == 3 and all(row.mtime_ns and row.size for row, _term in got)
    reads = [q for q in sql if "FROM crystals" in q]
    assert reads, sql
    assert not [q for q in reads if "files" in q], reads


def test_the_session_table_holds_each_row_once(tmp_path):
    """A new session's budget skips are ~240 ``pending`` rows; WITHOUT ROWID writes each once,
    not into the table and again into its primary-key index."""
    g = Geode(tmp_path)
    _store(g, near=1)
    g.init_db()
    assert g.bash("git push").context
    conn = sqlite3.connect(index_path(g.settings()))
    try:
        (without_rowid,) = conn.execute("SELECT wr FROM pragma_table_list WHERE name = 'sess'").fetchone()
        kept = conn.execute("SELECT COUNT(*) FROM sess WHERE session = 's1'").fetchone()[0]
    finally:
        conn.close()
    assert kept > 0
    assert without_rowid == 1


def test_the_hook_loads_neither_zlib_nor_team_rules_nor_the_control_arm_it_does_not_use(tmp_path):
    g = Geode(tmp_path)
    _store(g, near=1)
    g.init_db()
    event = json.dumps(g.event("PreToolUse", tool_name="Bash", tool_input={"command": "git push"}))
    g.run_raw(event)  # builds the index
    res = g.run_raw(event, flags="-X importtime")
    assert res.rc == 0 and res.stdout, res
    mods = {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    assert "geode.delivery.hook" in mods
    loaded = sorted(mods & {"zlib", "geode.delivery.team_sync", "geode.kernel.team_rules", "geode.delivery.control"})
    assert loaded == [], f"the hook loaded {loaded} on a call that needs none of them (arm off, no team rules)"


def test_the_index_keeps_its_name_without_zlib():
    """A guard (it passes on the old code, which called zlib): an upgraded hook must find the
    index an older one built, so the name's CRC-32 is zlib's, byte for byte."""
    for data in (b"", b"main=/home/a/store", "main=/ü/s\x1fwork=/w".encode(), bytes(range(256)) * 3):
        assert index_module.crc32(data) == zlib.crc32(data)


def test_a_skip_row_is_what_the_json_encoder_writes():
    """A guard (it passes on the old code, which encoded the whole set): the budget-skip row's
    text, now joined from each pair's encoding, is the same JSON, cut at the same places."""
    items = [
        (f"main:a/{i}/n\u00e9{'x' * (i % 90)}.md", ["git push", 'say "hi"', "-D", "tab\there"][i % 4])
        for i in range(300)
    ]
    rows = ledger.skip_set_details("budget 4000", items)
    assert len(rows) > 1
    back = [tuple(p) for r in rows for p in fastjson.loads(r)["skipped"]]
    assert back == items
    for r in rows:
        obj = fastjson.loads(r)
        assert r == fastjson.dumps({"limit": "budget 4000", "skipped": obj["skipped"]})
        assert len(r) <= ledger.SKIP_SET_BYTES + 200


def test_the_second_prefilter_word_is_in_every_command_its_term_matches():
    """Checking a second word in SQL may only drop rows Python would reject: across every term
    and every text of the labelled sets (each term against every text of its action, not only its
    own cases), wherever the matcher says a term fires, its second word is in the normalised text."""
    import glob
    import os

    from geode.delivery import match
    from tests.matching_cases import load_cases

    terms: set[tuple[str, str]] = set()
    texts: set[tuple[str, str]] = set()
    for path in glob.glob(os.path.join(os.path.dirname(__file__), "fixtures", "matching_cases*.txt")):
        for case in load_cases(path)[0]:
            terms.add((case.action, case.term))
            texts.add((case.action, case.text))
    with_word = 0
    for action, term in sorted(terms):
        compiled = match.compile_term(term, action)
        words = [also for view, _key, also in index_module._compute_views(term, action) if view == "n" and also]
        for a, text in texts:
            if a != action or not words:
                continue
            prepared = match.prepare(("bash", "commit") if action == "commit" else (action,), text)
            if match.matches(compiled, prepared):
                with_word += 1
                assert all(w in prepared.norm for w in words), (term, text, words, prepared.norm)
    assert with_word >= 100, f"only {with_word} matches had a second word: the check checks little"
