"""Issue 25: the act hook records the crystals one action skipped for budget as one row (the
set in its ``detail``), not one row each, and every reader of the ledger says what it said
when each skip was its own row: ``geode stats`` and ``geode study`` (the same figures), the
Gardener's scan (which crystals matched) and lint's term shares."""

from __future__ import annotations

import sqlite3
import time

from geode.delivery import ledger
from geode.delivery.lint import ledger_term_shares
from geode.evidence.stats import compute_stats
from geode.evidence.study import compute_study
from geode.gardener.scan import scan
from geode.kernel import fastjson
from geode.records import models
from tests.helpers import Geode

MATCHING = 40  # crystals a command matches; the budget fits a few


def _store(g: Geode) -> None:
    g.config("[delivery]\nbudget = 600\n")
    for i in range(MATCHING):
        g.crystal(f"c{i:02d}.md", f"Note {i}: " + "x" * 150, name=f"note-{i}", match="make", salience=0.5)
    g.crystal("other.md", "Other: pytest note.", name="other", match="pytest")
    g.init_db(withhold="0.5")


def _sessions(g: Geode) -> None:
    """Real hook calls, each session new, as agents run: a matching command, another, a lookup."""
    for n in range(4):
        s = f"sess-{n}"
        g.bash("make all", session=s, withhold="0.5")
        g.bash("make test", session=s, withhold="0.5")
        g.bash("pytest -q", session=s, withhold="0.5")
        g.tool("Grep", {"pattern": "make", "path": str(g.store)}, session=s, withhold="0.5")


def _expand_to_old_rows(db: str) -> int:
    """Rewrite each skip set as the one-row-per-crystal rows the hook wrote before issue 25;
    returns how many rows the sets held."""
    conn = sqlite3.connect(db)
    try:
        cols = ledger.EVENT_FIELDS
        sets = conn.execute(
            f"SELECT id, {', '.join(cols)} FROM ledger_event WHERE kind='skipped_budget' AND crystal_id=''"
        ).fetchall()
        n = 0
        for row in sets:
            ev = dict(zip(cols, row[1:], strict=True))
            limit = fastjson.loads(ev["detail"])["limit"]
            for cid, term in ledger.skipped_items("", "", ev["detail"]):
                old = dict(ev, crystal_id=cid, path=cid.split(":", 1)[1], domain="main", term=term, detail=limit)
                old["event_id"] = f"{n:032x}"
                conn.execute(
                    f"INSERT INTO ledger_event ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [old[c] for c in cols],
                )
                n += 1
            conn.execute("DELETE FROM ledger_event WHERE id=?", (row[0],))
        conn.commit()
        return n
    finally:
        conn.close()


def _figures(g: Geode, now: float) -> dict:
    s = g.settings(withhold="0.5")
    engine = models.init_db(s)
    try:
        reg = [f"main:c{i:02d}.md" for i in range(MATCHING)] + ["main:other.md"]
        stats = compute_stats(s, engine, reg, [], days=None, now=now)
        study = compute_study(s, engine)
        sc = scan(engine, s.domains, window_s=10 * 86400)
        with engine.connect() as conn:
            shares = ledger_term_shares(conn)
        return {
            "stats": {k: v for k, v in stats.items() if k not in ("window",)},
            "study": study,
            "matched": sorted(sc.matched),
            "shares": shares,
        }
    finally:
        engine.dispose()


def test_a_budget_skip_is_one_row_per_action(tmp_path):
    g = Geode(tmp_path)
    _store(g)
    res = g.bash("make all", session="one", withhold="0")
    assert res.rc == 0 and res.errors == ""
    delivered = g.rows("delivered")
    skips = g.rows("skipped_budget")
    assert 0 < len(delivered) < MATCHING
    assert len(skips) == 1, f"{len(skips)} skip rows for one action"
    items = ledger.skipped_items(skips[0]["crystal_id"], skips[0]["term"], skips[0]["detail"])
    assert len(items) == MATCHING - len(delivered)
    assert {c for c, _t in items}.isdisjoint({r["crystal_id"] for r in delivered})
    assert all(t == "make" for _c, t in items)


def test_a_large_skip_set_is_cut_to_fit_spool_lines():
    items = [(f"main:deep/folder/crystal-{i:05d}.md", "npm run build") for i in range(300)]
    details = ledger.skip_set_details("budget 2500", items)
    assert 1 < len(details) < 30
    got = [p for d in details for p in ledger.skipped_items("", "", d)]
    assert got == items
    for d in details:  # each row still one atomic spool write
        ev = ledger.new_event("skipped_budget", session="s", detail=d)
        assert len(ledger.encode_line(ev)) <= ledger.MAX_LINE_BYTES
        assert "detail_truncated" not in ledger.encode_line(ev).decode()


def test_an_older_row_reads_as_its_one_crystal():
    assert ledger.skipped_items("main:a.md", "make", "budget 2500") == [("main:a.md", "make")]
    assert ledger.skipped_items("", "", "not json") == []


def test_stats_study_gardener_and_lint_read_the_same_either_way(tmp_path):
    g = Geode(tmp_path)
    _store(g)
    _sessions(g)
    sets = g.rows("skipped_budget")
    assert sets and all(r["crystal_id"] == "" for r in sets)
    assert g.rows("withheld") and g.rows("delivered") and g.rows("blocked")  # both arms and lookups to count
    now = time.time() + 60
    new = _figures(g, now)
    held = _expand_to_old_rows(str(g.home / "geode.db"))
    assert held >= len(sets) * 2  # the old form really had more rows
    old = _figures(g, now)
    assert new["stats"]["examined_events"] > 0 and new["matched"]
    assert new == old
