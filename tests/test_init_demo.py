"""``geode init --demo`` (issue 24): a fresh store on which upkeep has real work. The demo notes
are honest notes with one problem each, found by the agents' normal rules (nothing in agent code
knows the demo): the Librarian relinks ``[[Release notes]]`` to the note that declares that alias,
the Cleaner marks a note superseded that another says it supersedes, the Corrector dates a stale
fact's re-verification ahead of today. Each proposal applies and undoes to the exact bytes."""

from __future__ import annotations

import datetime as dt
import re

from geode.agents.upkeep import order, run_agent
from geode.cli.setup_cmds import DEMO_DIR, STARTER_DIR, ensure_store
from geode.queue import apply, proposals
from tests.test_corrector import after_bytes

NO_BACKGROUND = "[recall]\nbackground_build = false\n"


def test_init_demo_gives_each_agent_its_real_work_and_every_proposal_applies_and_undoes(geode_env):
    geode_env.toml(NO_BACKGROUND)
    settings, engine, root = geode_env
    r = ensure_store(settings, demo=True)
    demo = sorted(p.name for p in DEMO_DIR.glob("*.md"))
    assert len(demo) >= 5
    assert set(r["created"]) == {p.name for p in STARTER_DIR.glob("*.md")} | set(demo)

    filed = []
    for agent in order(settings):
        filed += run_agent(settings, engine, "demo", agent).proposals
    got = {(p["kind"], p["paths"][0]) for p in filed}
    assert {
        ("edit", "deploy-checklist.md"),  # the Librarian: [[Release notes]] -> release-notes-2026
        ("status", "ci-cache-key-by-branch.md"),  # the Cleaner: superseded, still marked stable
        ("edit", "staging-database-host.md"),  # the Corrector: review_due
    } <= got, got
    # the starter set itself gives no work: every proposal is about a demo note
    assert all(p["paths"][0] in demo for p in filed), got

    review = next(p for p in filed if p["paths"][0] == "staging-database-host.md")
    m = re.search(rb"review_due: (\d{4}-\d\d-\d\d)", after_bytes(engine, review["id"]))
    assert m and dt.date.fromisoformat(m.group(1).decode()) > dt.date.today()

    for p in filed:
        (path,) = proposals.get(engine, p["id"])["paths"]
        before = (root / path).read_bytes()
        assert apply.approve(settings, engine, p["id"], "person")["ok"]
        assert (root / path).read_bytes() != before
        assert apply.undo(settings, engine, p["id"], "person")["ok"]
        assert (root / path).read_bytes() == before


def test_a_plain_init_writes_no_demo_note(geode_env):
    geode_env.toml(NO_BACKGROUND)
    settings, _engine, root = geode_env
    ensure_store(settings)
    assert not any((root / p.name).exists() for p in DEMO_DIR.glob("*.md"))
