"""From use to a proposal, with no hand-built ledger: the real hook blocks the agent's hunts
through the store, and the Gardener turns those rows into a crystal stub bound to what was
hunted. Guards the seam between ``delivery/hook.py`` (what a blocked row records) and
``gardener/`` (what it reads)."""

from __future__ import annotations

from geode.agents.upkeep import run_agent
from geode.queue import proposals
from geode.queue import review as queue_review
from geode.records.models import init_db
from tests.helpers import Geode, crystal_text


def test_blocked_hunts_become_a_stub_with_the_hunted_term(tmp_path):
    g = Geode(tmp_path)
    g.write("runbooks/deploy.md", crystal_text("Deploys go through the pipeline.", name="deploy", match="deploy"))
    g.write("notes/misc.md", "---\nname: misc\n---\nNothing about releases here.\n")
    g.init_db()
    store = str(g.store)
    hunts = [
        f"grep -rn retention-policy {store}",
        f"grep -ri 'retention-policy' {store}/runbooks",
        f"rg retention-policy {store}",
    ]
    for i, cmd in enumerate(hunts):
        r = g.bash(cmd, session=f"s{i}")
        assert r.rc == 0 and not r.errors, r
        assert r.json["hookSpecificOutput"]["permissionDecision"] == "deny"
    blocked = g.rows("blocked")
    assert len(blocked) == 3
    assert all("retention-policy" in row["detail"] for row in blocked)

    settings = g.settings()
    engine = init_db(settings)
    # the ledger opened 40 days ago (the Gardener files nothing from a ledger younger than its
    # window): one blocked lookup with no command, which no rule reads
    import time

    from geode.delivery import ledger

    old = ledger.new_event(
        "blocked",
        ts=time.time() - 40 * 86400,
        session="first-session",
        domain="main",
        action="grep",
        channel="guard",
        term="grep",
        detail={"tool": "Bash", "what": "grep"},
    )
    assert ledger.append(settings, [old]) == "db"
    report = run_agent(settings, engine, "night-test", "gardener")
    assert report.status == "ok", report.message
    stubs = [p for p in report.proposals if p["kind"] == "new_note"]
    assert len(stubs) == 1, report.as_dict()
    full = proposals.get(engine, stubs[0]["id"])
    cited = sorted(e["ledger_event"] for e in full["evidence"] if "ledger_event" in e)
    assert cited == sorted(row["id"] for row in blocked)
    diff = queue_review.diff(engine, stubs[0]["id"])
    assert "retention-policy" in diff and "match:" in diff
