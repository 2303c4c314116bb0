"""No proposal of any agent rests on a fact geode itself wrote (issue 21), and every proposal
says which facts justify it (``proposal_fact``).

Each agent gets a store where an earlier approved proposal created the fact its next proposal
would rest on, and the same store with a person's fact as the control:

- the Librarian: a link sent to a note that exists only because a geode proposal created it
  (found by the alias that note declares), or to a person's note whose alias geode wrote;
- the Corrector: a ``last_verified`` date geode wrote makes no ``review_due`` proposal;
- the Gardener: a crystal geode created (a stub) that never fired is not proposed for
  retirement;
- the gate itself: a draft whose finding sits on a line geode wrote, or whose folder count
  holds geode's files, is refused and counted, whichever agent made it.

And the facts: filed with their provenance, shown by ``geode proposals show`` and the page's
proposal view, and ``[]`` for a proposal filed before the table existed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from geode.agents.contract import Context, Fact, Finding, Proposed, Report
from geode.agents.evidence_gate import GEODE_FINDING, GEODE_MADE, provenance_screen
from geode.agents.upkeep import run_agent
from geode.queue import apply, proposals
from geode.queue.proposals import FileChange, ProposalDraft
from tests.stores import GeodeEnv
from tests.test_gardener import END, _never_ledger, age_files, crystal, make_env


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _apply(settings, engine, agent, kind, changes, key) -> int:
    """A proposal filed and approved, as a trusting person does the night before."""
    draft = ProposalDraft(agent, kind, settings.default_domain, key, "by hand", [{"finding": 1}], changes, "r0", key)
    pid = proposals.file_proposal(settings, engine, draft)
    assert pid is not None and apply.approve(settings, engine, pid, "person")["ok"]
    return pid


# -- the Librarian -----------------------------------------------------------------------------------
_GUIDE = "---\nname: guide\naliases: [Old Guide]\n---\n# Guide\n\nSteps.\n"
_LINKING = {
    "docs/a.md": "---\nname: a\n---\n# A\n\nRead [[Old Guide]] first.\nAlso [[b]].\n",
    "docs/b.md": "---\nname: b\n---\n# B\n\nSee [[a]].\n",
}


def test_the_librarian_sends_no_link_to_a_note_geode_created(tmp_path):
    settings, engine, root = GeodeEnv(tmp_path, root="main").files(dict(_LINKING), "")
    pid = _apply(settings, engine, "cleaner", "new_note", [FileChange("new/guide.md", None, _GUIDE.encode())], "stub")
    report = run_agent(settings, engine, "n1", "librarian")
    [f] = [f for f in report.findings if f.kind == "broken-link"]
    assert f.suggestion == "new/guide.md"  # the alias it declares would make it the one good target
    assert report.proposals == []
    assert report.held_back == {GEODE_MADE: 1}
    [refused] = [f for f in report.findings if f.kind == GEODE_FINDING]
    assert refused.path == "new/guide.md" and f"written by proposal #{pid}" in refused.message
    assert (root / "docs/a.md").read_text(encoding="utf-8") == _LINKING["docs/a.md"]


def test_the_librarian_rewrites_to_a_persons_note_and_files_its_facts(tmp_path):
    files = {**_LINKING, "new/guide.md": _GUIDE}
    settings, engine, _root = GeodeEnv(tmp_path, root="main").files(files, "")
    report = run_agent(settings, engine, "n1", "librarian")
    [p] = report.proposals
    assert report.held_back == {}
    facts = proposals.get(engine, p["id"])["facts"]
    assert {(f["kind"], f["path"], f["line"], f["provenance"]) for f in facts} == {
        ("file", "new/guide.md", 0, "person"),
        ("frontmatter", "new/guide.md", 3, "person"),
        ("line", "docs/a.md", 6, "person"),
    }
    [line] = [f for f in facts if f["kind"] == "line"]
    assert line["value"] == "Read [[Old Guide]] first."


def test_the_librarian_does_not_follow_an_alias_geode_wrote_into_a_persons_note(tmp_path):
    plain = "---\nname: guide\n---\n# Guide\n\nSteps.\n"
    settings, engine, _root = GeodeEnv(tmp_path, root="main").files({**_LINKING, "new/guide.md": plain}, "")
    pid = _apply(
        settings,
        engine,
        "gardener",
        "edit",
        [FileChange("new/guide.md", _sha(plain.encode()), _GUIDE.encode())],
        "alias",
    )
    report = run_agent(settings, engine, "n1", "librarian")
    assert report.proposals == [] and report.held_back == {GEODE_MADE: 1}
    [refused] = [f for f in report.findings if f.kind == GEODE_FINDING]
    assert f"frontmatter new/guide.md:3 was written by proposal #{pid}" in refused.message


# -- the Corrector ----------------------------------------------------------------------------------
_STALE = b"---\nname: db-host\ntype: fact\nlast_verified: 2020-01-01\n---\n# DB host\nThe primary is db-1.\n"


def test_the_corrector_marks_no_review_on_a_date_geode_wrote(tmp_path):
    earlier = _STALE.replace(b"2020-01-01", b"2019-06-01")
    settings, engine, _root = GeodeEnv(tmp_path, root="main").files({"db-host.md": earlier}, "")
    pid = _apply(settings, engine, "gardener", "edit", [FileChange("db-host.md", _sha(earlier), _STALE)], "date")
    run_agent(settings, engine, "n1", "librarian")
    report = run_agent(settings, engine, "n1", "corrector")
    assert [f.kind for f in report.findings if f.kind == "stale"] == ["stale"]
    assert report.proposals == [] and report.held_back == {GEODE_MADE: 1}
    [refused] = [f for f in report.findings if f.kind == GEODE_FINDING]
    assert f"proposal #{pid}" in refused.message and refused.path == "db-host.md"


def test_the_corrector_marks_a_review_on_a_persons_date(tmp_path):
    settings, engine, _root = GeodeEnv(tmp_path, root="main").files({"db-host.md": _STALE}, "")
    run_agent(settings, engine, "n1", "librarian")
    report = run_agent(settings, engine, "n1", "corrector")
    [p] = report.proposals
    facts = proposals.get(engine, p["id"])["facts"]
    assert ("frontmatter", "db-host.md", 4, "person") in {
        (f["kind"], f["path"], f["line"], f["provenance"]) for f in facts
    }


# -- the Gardener -----------------------------------------------------------------------------------
def test_the_gardener_retires_no_crystal_geode_created(tmp_path):
    store = {"ci/pipes.md": crystal("pipes", '"| tail"')}
    settings, engine, root = make_env(tmp_path, store)
    stub = crystal("old-trick", "frobnicate").encode()
    pid = _apply(settings, engine, "gardener", "new_note", [FileChange("misc/old.md", None, stub)], "stub")
    age_files(root)
    _never_ledger(settings, root)
    report = run_agent(settings, engine, "r", "gardener")
    assert [f.path for f in report.findings if f.kind == "never-fired"] == ["misc/old.md"]
    assert [p for p in report.proposals if "misc/old.md" in p["paths"]] == []
    assert report.held_back.get(GEODE_MADE) == 1
    [refused] = [f for f in report.findings if f.kind == GEODE_FINDING]
    assert f"proposal #{pid}" in refused.message


def test_the_gardener_retires_a_persons_crystal_that_never_fired(tmp_path):
    store = {"ci/pipes.md": crystal("pipes", '"| tail"'), "misc/old.md": crystal("old-trick", "frobnicate")}
    settings, engine, root = make_env(tmp_path, store)
    _never_ledger(settings, root)
    report = run_agent(settings, engine, "r", "gardener")
    [p] = [p for p in report.proposals if "misc/old.md" in p["paths"]]
    assert p["kind"] == "status" and GEODE_MADE not in report.held_back
    facts = proposals.get(engine, p["id"])["facts"]
    assert {f["provenance"] for f in facts} == {"person"} and {f["kind"] for f in facts} == {"frontmatter", "line"}
    assert END  # the ledger's clock the store was aged against


# -- the gate, whichever agent ---------------------------------------------------------------------------
def _draft(settings, path: str, data: bytes, key: str) -> ProposalDraft:
    after = data.replace(b"# N", b"# N (edited)")
    return ProposalDraft(
        "poison", "edit", settings.default_domain, key, "r", [], [FileChange(path, _sha(data), after)], "n1", key
    )


def test_the_gate_refuses_a_finding_on_a_line_geode_wrote_until_a_person_rewrites_it(tmp_path):
    before = b"---\nname: n\n---\n# N\n\nSee [[x]].\n"
    geode_line = b"---\nname: n\n---\n# N\n\nSee [[y]].\n"
    settings, engine, root = GeodeEnv(tmp_path, root="main").files({"n.md": before}, "")
    pid = _apply(settings, engine, "librarian", "edit", [FileChange("n.md", _sha(before), geode_line)], "rw")
    ctx = Context(settings, engine, "n1")
    report, counts = Report("poison"), Counter()
    prop = Proposed(_draft(settings, "n.md", geode_line, "k"), [Finding("broken-link", "n.md", 6, "y", "", "main")])
    assert provenance_screen(ctx, [prop], report, counts) == []
    assert counts == {GEODE_MADE: 1}
    assert f"line n.md:6 was written by proposal #{pid}" in report.findings[0].message
    # a person writes the line again: now it is theirs, and the same draft passes with its facts
    (root / "n.md").write_bytes(geode_line.replace(b"See [[y]].", b"See [[y]], really."))
    mine = (root / "n.md").read_bytes()
    prop = Proposed(_draft(settings, "n.md", mine, "k2"), [Finding("broken-link", "n.md", 6, "y", "", "main")])
    [kept] = provenance_screen(Context(settings, engine, "n2"), [prop], Report("poison"), Counter())
    assert kept.draft.facts == [
        {"kind": "line", "path": "n.md", "line": 6, "value": "See [[y]], really.", "provenance": "person"}
    ]


def test_the_gate_refuses_a_count_that_holds_geodes_files_and_allows_an_applied_move(tmp_path):
    files = {f"inbox/i{i}.md": f"---\nname: i{i}\n---\n# N\n" for i in range(3)}
    settings, engine, root = GeodeEnv(tmp_path, root="main").files(files, "")
    stub = b"---\nname: stub\n---\n# Stub\n"
    pid = _apply(settings, engine, "cleaner", "new_note", [FileChange("inbox/stub.md", None, stub)], "stub")
    from geode.queue.changes import move_changes

    mid = _apply(settings, engine, "person", "move", move_changes(settings, "main", "inbox/i2.md", "kept/i2.md"), "mv")
    data = (root / "inbox/i0.md").read_bytes()
    over = Proposed(_draft(settings, "inbox/i0.md", data, "a"), facts=[Fact("count", "inbox", 0, {"count": 3})])
    fair = Proposed(
        _draft(settings, "inbox/i1.md", (root / "inbox/i1.md").read_bytes(), "b"),
        facts=[Fact("count", "inbox", 0, {"count": 2})],
    )
    moved = Proposed(
        _draft(settings, "kept/i2.md", (root / "kept/i2.md").read_bytes(), "c"),
        facts=[Fact("move", "kept/i2.md", 0, {"from": "inbox/i2.md", "to": "kept/i2.md"})],
    )
    report, counts = Report("poison"), Counter()
    kept = provenance_screen(Context(settings, engine, "n1"), [over, fair, moved], report, counts)
    assert [k.draft.key for k in kept] == ["b", "c"] and counts == {GEODE_MADE: 1}
    assert f"count inbox was written by proposal #{pid}" in report.findings[0].message
    assert kept[1].draft.facts[0]["provenance"] == f"geode:{mid}"  # shown as geode's, and allowed


# -- the facts, stored and shown ----------------------------------------------------------------------
def test_facts_are_shown_by_proposals_show_and_the_page(tmp_path):
    from starlette.testclient import TestClient

    from geode.web.app import create_app
    from tests.test_cli import geode

    files = {**_LINKING, "new/guide.md": _GUIDE}
    env = GeodeEnv(tmp_path, root="main").files(files, "")
    settings, engine, _root = env
    [p] = run_agent(settings, engine, "n1", "librarian").proposals
    extra = {"GEODE_STORE": str(env.root)}
    r = geode(env.home, "proposals", "show", str(p["id"]), env=extra)
    assert "fact      file new/guide.md: the link's new target (written by a person)" in r.stdout
    assert "fact      line docs/a.md:6: Read [[Old Guide]] first. (written by a person)" in r.stdout
    shown = json.loads(geode(env.home, "proposals", "show", str(p["id"]), "--json", env=extra).stdout)
    assert len(shown["facts"]) == 3
    port = 8765
    app = create_app(settings, token="t0ken", bound="127.0.0.1", port=port, who="me")
    client = TestClient(app, base_url=f"http://127.0.0.1:{port}")
    page = client.get(f"/proposals/{p['id']}", headers={"Cookie": f"geode_token_{port}=t0ken"})
    assert page.status_code == 200, page.text[:300]
    assert "Facts it rests on" in page.text and "docs/a.md:6" in page.text and "a person" in page.text


def test_a_proposal_filed_before_the_facts_table_reads_no_facts(tmp_path):
    settings, engine, root = GeodeEnv(tmp_path, root="main").files({"n.md": "---\nname: n\n---\n# N\n"}, "")
    data = (root / "n.md").read_bytes()
    pid = proposals.file_proposal(
        settings,
        engine,
        ProposalDraft(
            "person",
            "edit",
            "main",
            "t",
            "r",
            [{"finding": 1}],
            [FileChange("n.md", _sha(data), data + b"x\n")],
            "r",
            "k",
        ),
    )
    with engine.begin() as conn:  # as a row from before 0002_proposal_fact: no facts at all
        conn.exec_driver_sql("DELETE FROM proposal_fact")
    assert proposals.get(engine, pid)["facts"] == []
    assert Path(root / "n.md").read_bytes() == data
