"""Nothing is written into a team-rules domain (``[team_rules]`` in geode.toml).

Its notes are derived into ``GEODE_HOME/team/<name>`` from a repository's own rules and rewritten
from them by the next sync (``geode.delivery.team_sync``): a note written or approved there would
be lost without a word. Every surface that writes refuses, naming the domain and why: the MCP
``write_note`` tool (the real server over stdio, the SDK's client), the page's approve (``geode
web`` as a process, a real HTTP request), and ``geode proposals approve``, because the page and
the command line both write only through ``geode.queue.apply``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geode.delivery import team_sync
from geode.queue import changes, proposals
from tests.helpers import Geode
from tests.test_mcp import error, ok, session
from tests.web_helpers import Server, request

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "team_repo"
REPO_ROOT = Path(__file__).resolve().parent.parent
DERIVED = "cursor/typescript.md"  # one note the sync derives from the fixture's Cursor rules


@pytest.fixture
def team(tmp_path):
    """A home with one ordinary domain (``main``) and one team-rules domain (``acme``), its
    derived notes already synced, so a write there has a folder to land in."""
    repo = tmp_path / "acme"
    shutil.copytree(FIXTURE, repo)
    g = Geode(tmp_path, config=f'[domains]\nmain = "store"\n\n[team_rules]\nacme = "{repo}"\n')
    g.crystal("ops/deploy.md", "Deploys go out from main only.", on="bash", match="deploy")
    g.init_db()
    s = g.settings()
    team_sync.sync(s)
    assert (Path(team_sync.mirror_root(s.home, "acme")) / DERIVED).is_file()
    return g


def mirror(g: Geode) -> Path:
    return Path(team_sync.mirror_root(str(g.home), "acme"))


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_write_note_refuses_a_team_rules_domain_and_keeps_writing_elsewhere(team):
    before = files_of(mirror(team))

    async def fn(c):
        return {
            "new": await c.call_tool(
                "write_note", {"title": "Our own TypeScript rule", "body": "Prefer type aliases.", "domain": "acme"}
            ),
            "edit": await c.call_tool(  # the title of a derived note: would have become a proposal
                "write_note", {"title": "typescript", "folder": "cursor", "body": "Changed.", "domain": "acme"}
            ),
            "main": await c.call_tool("write_note", {"title": "Release freeze", "body": "No deploys on Fridays."}),
        }

    r = session(team.home, fn)
    for name in ("new", "edit"):
        msg = error(r[name])
        assert "domain 'acme' is a team-rules domain" in msg, msg
        assert "[team_rules]" in msg and "next sync" in msg and "main" in msg, msg
    assert files_of(mirror(team)) == before  # nothing written into the derived folder
    engine = proposals.open_queue(team.settings())
    assert proposals.list_proposals(engine) == []  # and nothing filed against it either
    assert ok(r["main"])["outcome"] == "written"
    assert (team.store / "release-freeze.md").is_file()


def _file_edit_of_a_derived_note(g: Geode) -> int:
    """An edit proposal against a derived note, filed through the queue's own API (as a
    ``write_note`` from before this refusal, or any other filer, would have left it)."""
    from sqlalchemy import select

    from geode.delivery import ledger
    from geode.records import models

    s = g.settings()
    engine = proposals.open_queue(s)
    ev = ledger.new_event("write_requested", session="s1", domain="acme", path=DERIVED, action="write")
    models.insert_events(engine, [ev])
    t = models.table_of(models.LedgerEvent)
    with engine.connect() as conn:
        eid = conn.execute(select(t.c.id).where(t.c.event_id == ev["event_id"])).scalar_one()
    change = changes.edit_change(s, "acme", DERIVED, b"---\ntitle: typescript\n---\nOverwritten by hand.\n")
    draft = proposals.ProposalDraft(
        agent="mcp",
        kind="edit",
        domain="acme",
        title=f"Update {DERIVED}",
        rationale="a change to a derived note",
        evidence=[{"ledger_event": int(eid)}],
        changes=[change],
        run_id="test",
        key="derived-edit",
    )
    pid = proposals.file_proposal(s, engine, draft)
    assert pid is not None
    return pid


def test_the_page_refuses_to_approve_into_a_team_rules_domain(team):
    pid = _file_edit_of_a_derived_note(team)
    before = files_of(mirror(team))
    with Server(team.home) as srv:
        seen, _h, shown = request(srv, "GET", f"/api/proposals/{pid}")
        status, _h, out = request(srv, "POST", f"/api/proposals/{pid}/approve", body={})
    assert seen == 200 and json.loads(shown)["check"]["would"] == "failed"  # the page says so before
    assert "domain 'acme' is a team-rules domain" in json.loads(shown)["check"]["message"]
    body = json.loads(out)
    assert status == 409, body
    assert body["ok"] is False and body["status"] == "failed"
    assert "domain 'acme' is a team-rules domain" in body["message"] and "next sync" in body["message"]
    assert files_of(mirror(team)) == before


def test_geode_proposals_approve_refuses_a_team_rules_domain(team):
    pid = _file_edit_of_a_derived_note(team)
    before = files_of(mirror(team))
    p = subprocess.run(
        [sys.executable, "-m", "geode", "proposals", "approve", str(pid), "--json"],
        env=team.env(),
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode != 0, p.stdout
    [res] = json.loads(p.stdout)["results"]
    assert res["ok"] is False and "domain 'acme' is a team-rules domain" in res["message"], res
    assert files_of(mirror(team)) == before
    engine = proposals.open_queue(team.settings())
    assert proposals.get(engine, pid)["status"] == "failed"
