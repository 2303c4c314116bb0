"""The Corrector: bounded, mechanical fixes for the findings the other agents stored.

Each repair kind with its exact bytes before and after (CRLF, BOM, no final newline kept), the
bound (an edit over it is a finding, not a proposal), the essence never reworded, apply and
undo byte-exact through the real queue, every fixture after a Librarian run in the same run id
(``tests/fixtures/corrector_expected/<store>.json``, counted from EXPECTED.json), the
examined-nothing rule, and reruns.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import stat
from pathlib import Path

import pytest

from geode.agents.contract import Finding, load_findings
from geode.agents.recording import store_findings
from geode.agents.upkeep import run_agent
from geode.corrector.agent import MAX_LINES, Corrector
from geode.corrector.edits import FileLines, changed_lines, check_edit, mask_link_targets, quote_value
from geode.queue import apply, proposals
from geode.queue import changes as CH
from geode.queue import review as queue_review
from geode.queue import tables as queue_tables
from tests.upkeep_helpers import ALL_STORES, FIXTURES, expected_of, setup

BOM = b"\xef\xbb\xbf"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def after_bytes(engine, pid: int) -> bytes:
    from sqlalchemy import select

    with engine.connect() as conn:
        (data,) = conn.execute(select(queue_tables.C.c.after).where(queue_tables.C.c.proposal_id == pid)).one()
    return bytes(data)


def approve_and_undo_exactly(settings, engine, root: Path, pid: int) -> bytes:
    """Approve, check the file is the proposal's bytes (mode kept), undo, check the original
    bytes and mode are back; returns the applied bytes."""
    full = proposals.get(engine, pid)
    (path,) = full["paths"]
    before = (root / path).read_bytes()
    mode = stat.S_IMODE((root / path).stat().st_mode)
    want = after_bytes(engine, pid)
    res = apply.approve(settings, engine, pid, "tester")
    assert res["ok"], res
    assert (root / path).read_bytes() == want
    assert stat.S_IMODE((root / path).stat().st_mode) == mode
    res = apply.undo(settings, engine, pid, "tester")
    assert res["ok"], res
    assert (root / path).read_bytes() == before
    assert stat.S_IMODE((root / path).stat().st_mode) == mode
    return want


def corrector_props(engine, run_id: str) -> list[dict]:
    return proposals.list_proposals(engine, run_id=run_id, agent="corrector")


# -- every fixture, after the Librarian in the same run --------------------------------------
#: every store under tests/fixtures (cleaner_truths came with the Cleaner; it has no EXPECTED.json)
STORES = ALL_STORES + ["cleaner_truths"]
TODAY = dt.date(2026, 11, 15)


class CorrectorOnAFixedDay(Corrector):
    """Freshness judged on ``TODAY``, so that the counts do not move with the calendar."""

    today = TODAY


FIXED_DAY = '[upkeep]\nagents = { corrector = "tests.test_corrector:CorrectorOnAFixedDay" }\n'


#: kept apart from the stores: a file inside a fixture is copied into every store built from it
EXPECTED_DIR = FIXTURES / "corrector_expected"


def expected_corrector(name: str) -> dict:
    return expected_of("corrector", name)


def fixture(name: str, tmp_path: Path):
    settings, engine, root, manifest = setup(name, tmp_path, FIXED_DAY)
    for extra in root.glob("EXPECTED_*.json"):  # other agents' expectations are not part of the store
        extra.unlink()
    return settings, engine, root


def test_every_fixture_under_tests_fixtures_is_covered():
    assert sorted(p.stem for p in EXPECTED_DIR.glob("*.json")) == sorted(STORES)
    # flavours/ holds one small store per flavour, judged by tests/test_flavours.py; frontmatters/ is
    # a corpus of frontmatter texts for tests/test_frontmatter_yaml.py, not a store; team_repo/ is a
    # repository whose own rules a team-rules domain reads (tests/test_team_rules.py), not a store
    not_stores = ("flavours", "frontmatters", "team_repo")
    stores = [
        p.name
        for p in FIXTURES.iterdir()
        if p.is_dir() and not p.name.endswith("_expected") and p.name not in not_stores
    ]
    assert sorted(stores) == sorted(STORES)


@pytest.mark.slow
@pytest.mark.parametrize("name", STORES)
def test_every_fixture_after_the_librarian_in_the_same_run(name, tmp_path):
    exp = expected_corrector(name)
    settings, engine, root = fixture(name, tmp_path)
    lib = run_agent(settings, engine, "night-1", "librarian")
    assert lib.status == "ok", lib.message
    report = run_agent(settings, engine, "night-1", "corrector")
    assert report.status == "ok", report.message
    assert report.agent == "corrector" and isinstance(report.examined, dict)

    # what it read: exactly the Librarian's stored findings, by kind
    assert report.examined["findings_read"] == len(lib.findings)
    by_kind: dict[str, int] = {}
    for f in lib.findings:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
    assert {k[5:]: v for k, v in report.examined.items() if k.startswith("read:")} == by_kind
    # every examined count, exactly (those not listed are 0)
    assert {k: v for k, v in report.examined.items() if v or k in exp["examined"]} == exp["examined"]
    assert report.store_notes == report.examined["notes"]

    assert [[f.kind, f.path, f.line, f.target] for f in report.findings] == exp["findings"]
    assert [[s.path, s.line, s.target, s.reason] for s in report.skipped] == exp["skipped"]
    assert len(report.proposals) == len(exp["proposals"])
    for p, want in zip(report.proposals, exp["proposals"], strict=False):
        assert p["kind"] == want["kind"] and p["paths"] == [want["path"]]
        diff = queue_review.diff(engine, p["id"])
        assert [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))] == want["diff"]
        # evidence: the stored findings about that file (the Librarian's, or its own stale ones)
        ev = proposals.get(engine, p["id"])["evidence"]
        cited = {f.id for f in lib.findings + report.findings if f.path == want["path"]}
        assert ev and {e["finding"] for e in ev} <= cited
        approve_and_undo_exactly(settings, engine, root, p["id"])
    # never the same edit twice: no line of a file is changed by two pending proposals
    touched: dict[str, int] = {}
    for p in proposals.list_proposals(engine, status="pending"):
        for path in p["paths"]:
            touched[path] = touched.get(path, 0) + 1
    assert all(n == 1 for n in touched.values()), touched


def test_the_fixtures_counts_add_up_from_the_librarians_expected():
    """corrector_expected/<store>.json is derived by hand from EXPECTED.json: the sums must agree."""
    from tests.upkeep_helpers import expected

    checked = 0
    for name in STORES:
        if not (FIXTURES / name / "EXPECTED.json").exists():
            continue
        lib, cor = expected(name), expected_corrector(name)
        if "findings" in lib:
            links = [f for f in lib["findings"] if f[0] in ("broken-link", "signpost-stale")]
            assert cor["examined"]["findings_read"] == len(lib["findings"])
            with_target = sum(1 for f in links if f[4])
            assert cor["examined"].get("no_good_target", 0) == len(links) - with_target
            assert cor["examined"].get("already_proposed", 0) == with_target
            yaml_bad = sum(1 for f in lib["findings"] if f[0] == "frontmatter-not-yaml")
            assert cor["examined"].get("fixes_proposed", 0) == yaml_bad == len(cor["proposals"])
        else:
            assert cor["examined"]["findings_read"] == lib["broken_links"] == 10
            assert cor["examined"]["already_proposed"] == lib["proposals"] == 3
        checked += 1
    assert checked == 8


# -- each repair, bytes before and after ------------------------------------------------------
def test_unquoted_glob_is_quoted_keeping_bom_crlf_and_no_final_newline(geode_env):
    before = (
        BOM
        + b"---\r\ndescription: Python style\r\nglobs: **/*.py\r\nalwaysApply: false\r\n---\r\n# Style\r\nUse hints."
    )
    # geode's own note (.md: its header is YAML to geode); the same bytes as a Cursor rule are
    # never quoted (test_tool_headers)
    settings, engine, root = geode_env.files(
        {"py.md": before, "other.md": b'---\nglobs: "*.sql"\n---\nSQL.\n', "rule.mdc": before}
    )
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert report.status == "ok", report.message
    (p,) = report.proposals
    assert p["paths"] == ["py.md"]
    want = (
        BOM
        + b'---\r\ndescription: Python style\r\nglobs: "**/*.py"\r\nalwaysApply: false\r\n---\r\n# Style\r\nUse hints.'
    )
    assert after_bytes(engine, p["id"]) == want
    approve_and_undo_exactly(settings, engine, root, p["id"])
    import yaml  # a strict YAML reader (chromadb depends on PyYAML; listed in the test extra)

    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(before.decode("utf-8-sig").split("---")[1])
    assert yaml.safe_load(want.decode("utf-8-sig").split("---")[1])["globs"] == "**/*.py"


def test_a_glob_in_a_list_and_one_before_a_comment(geode_env):
    before = b"---\ndescription: x\nglobs:\n  - **/*.py\n  - src/**\nname: &anchor   # trailing\nalwaysApply: false\n---\nBody\n"
    settings, engine, root = geode_env.files({"r.md": before})
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    (p,) = report.proposals
    assert after_bytes(engine, p["id"]) == (
        b'---\ndescription: x\nglobs:\n  - "**/*.py"\n  - src/**\nname: "&anchor"   # trailing\n'
        b"alwaysApply: false\n---\nBody\n"
    )
    assert report.examined["fixes_proposed"] == 2 and report.examined["lines_changed"] == 2


def test_crystal_match_with_a_leading_pipe_is_quoted_and_fires_the_same(geode_env):
    """The crystal-memory form: no agent before it flags it, so the Corrector takes it from the
    parser's warning and records its own finding."""
    from geode.delivery.binding import parse_binding
    from geode.kernel.note import parse_note

    before = (
        b"---\nname: tail\ncrystal:\n  deliver: act\n  on: bash\n  match: | tail, |tail, | head\n  who: all\n"
        b"---\n<!-- crystal:essence -->\nA pipe into tail hides the exit code.\n<!-- /crystal:essence -->\n\n"
        b"## Where this came from\nA red build shown green.\n"
    )
    settings, engine, root = geode_env.files({"tail.md": before})
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert [(f.kind, f.path, f.line) for f in report.findings] == [("frontmatter-not-yaml", "tail.md", 6)]
    (p,) = report.proposals
    after = after_bytes(engine, p["id"])
    assert after == before.replace(b"  match: | tail, |tail, | head\n", b'  match: "| tail, |tail, | head"\n')
    assert proposals.get(engine, p["id"])["evidence"] == [{"finding": report.findings[0].id}]
    a, b = parse_note(before.decode(), "tail.md"), parse_note(after.decode(), "tail.md")
    assert (
        parse_binding(a.crystal, a.fm_lines).terms
        == parse_binding(b.crystal, b.fm_lines).terms
        == ("| tail", "|tail", "| head")
    )
    assert a.essence == b.essence


def test_stale_note_gets_review_due_after_last_verified_and_keeps_its_status(geode_env):
    before = (
        b"---\r\nname: db-host\r\ntype: fact\r\nstatus: stable\r\nlast_verified: 2020-01-01\r\n"
        b"tags: [db]\r\n---\r\n# DB host\r\nThe primary is db-1.\r\n"
    )
    fresh = b"---\nname: fresh\ntype: fact\nlast_verified: 2999-01-01\n---\nFresh.\n"
    settings, engine, root = geode_env.files({"db-host.md": before, "fresh.md": fresh})
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert [(f.kind, f.path, f.line, f.target) for f in report.findings] == [
        ("stale", "db-host.md", 5, "last_verified")
    ]
    assert report.examined["stale_checked"] == 2
    (p,) = report.proposals
    # a date ahead to act by (today + 14 days), never last_verified + the duty (2020-03-31: past)
    due = (dt.date.today() + dt.timedelta(days=14)).isoformat().encode()
    assert after_bytes(engine, p["id"]) == before.replace(
        b"last_verified: 2020-01-01\r\n", b"last_verified: 2020-01-01\r\nreview_due: " + due + b"\r\n"
    )
    assert dt.date.fromisoformat(due.decode()) > dt.date.today()
    approve_and_undo_exactly(settings, engine, root, p["id"])


def test_review_due_follows_the_configured_freshness_duty_and_a_last_line_without_newline(geode_env):
    before = b"---\nlast_verified: 2020-01-01\n---\nno final newline"
    settings, engine, root = geode_env.files({"n.md": before}, toml="[delivery]\nfreshness_days = 30\n")
    days = settings.freshness_days
    assert days == 30
    report = run_agent(settings, engine, "r", "corrector")
    (p,) = report.proposals
    import datetime as dt

    due = (dt.date.today() + dt.timedelta(days=14)).isoformat().encode()
    assert (
        after_bytes(engine, p["id"])
        == b"---\nlast_verified: 2020-01-01\nreview_due: " + due + b"\n---\nno final newline"
    )


def test_a_renamed_notes_links_are_rewritten_from_the_move_history(geode_env):
    """The Librarian stored the findings; with no pending proposal of its own on those lines
    (here: its drafts were not filed), the Corrector proposes the rewrites, byte for byte what the
    Librarian drafted, and only the link targets change."""
    files = {
        "runbooks/deploy.md": b"---\nname: deploy\n---\n# Deploy\nShip it.\n",
        "guide/start.md": b"# Start\r\nRead [deploy](../runbooks/deploy.md#steps) and [[runbooks/deploy]].\r\nDone.",
        "other.md": b"# Other\n[[guide/start]]\n",
    }
    settings, engine, root = geode_env.files(files)
    domain = settings.default_domain
    mv = proposals.file_proposal(
        settings,
        engine,
        proposals.ProposalDraft(
            "person",
            "move",
            domain,
            "rename",
            "renamed",
            [{"ledger_event": 1}],
            CH.move_changes(settings, domain, "runbooks/deploy.md", "runbooks/deploy-checklist.md"),
            "m",
            "k",
        ),
    )
    assert apply.approve(settings, engine, mv, "person")["ok"]
    (root / "runbooks/deploy-checklist.md").write_bytes(
        b"---\nname: deploy-checklist\n---\n# Deploy\n## Steps\nShip.\n"
    )
    # the Librarian's findings stored, its draft not filed (a proposal a person rejected is held
    # back for every agent: geode.agents.filing)
    from geode.agents.contract import Context
    from geode.agents.recording import store_findings
    from geode.librarian.agent import Librarian

    lib = Librarian().examine(Context(settings, engine, "r"))
    links = sorted((f.kind, f.path, f.line, f.target, f.suggestion) for f in lib.findings if f.kind == "broken-link")
    assert links == [
        ("broken-link", "guide/start.md", 2, "../runbooks/deploy.md#steps", "runbooks/deploy-checklist.md"),
        ("broken-link", "guide/start.md", 2, "runbooks/deploy", "runbooks/deploy-checklist.md"),
    ]
    (lp,) = lib.proposed
    librarian_after = lp.draft.changes[0].after
    store_findings(engine, "r", "librarian", lib.findings)
    report = run_agent(settings, engine, "r", "corrector")
    (p,) = report.proposals
    want = (
        b"# Start\r\nRead [deploy](../runbooks/deploy-checklist.md#steps) and "
        b"[[runbooks/deploy-checklist|runbooks/deploy]].\r\nDone."
    )
    assert after_bytes(engine, p["id"]) == want == librarian_after
    assert report.examined["lines_changed"] == 1 and report.examined["fixes_proposed"] == 2
    assert mask_link_targets(files["guide/start.md"].decode()) == mask_link_targets(want.decode())
    approve_and_undo_exactly(settings, engine, root, p["id"])


def test_a_signposts_entries_for_moved_notes_are_updated(geode_env):
    """Findings stored by an earlier agent (here written straight into the findings table)."""
    files = {
        "README.md": b"# Index\n\n- [Install](guide/install.md)\n- [Old](guide/old.md)\n- [Gone](guide/gone.md)\n",
        "guide/install.md": b"# Install\n",
        "guide/setup.md": b"# Setup\n",
    }
    settings, engine, root = geode_env.files(files)
    d = settings.default_domain
    stored = [
        Finding("signpost-stale", "README.md", 4, "guide/old.md", "moved", d, "guide/setup.md"),
        Finding("signpost-stale", "README.md", 5, "guide/gone.md", "missing", d, ""),
    ]
    store_findings(engine, "r", "librarian", stored)
    report = run_agent(settings, engine, "r", "corrector")
    (p,) = report.proposals
    assert after_bytes(engine, p["id"]) == files["README.md"].replace(b"(guide/old.md)", b"(guide/setup.md)")
    assert report.examined["no_good_target"] == 1  # the missing entry is for a person
    assert {e["finding"] for e in proposals.get(engine, p["id"])["evidence"]} == {stored[0].id}


def test_the_same_rewrite_pending_from_the_librarian_is_not_proposed_again(tmp_path):
    # docs_tree: ../reference/CLI.md names reference/cli.md in another case, the one suggestion
    # with evidence (plain_notes' "Exit Codes" -> exit-codes.md was a similar name alone)
    settings, engine, root = fixture("docs_tree", tmp_path)
    lib = run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert report.proposals == []
    assert [(s.path, s.line, s.reason) for s in report.skipped] == [
        (
            "guide/install.md",
            15,
            f"the same edit is already proposed by the librarian (pending proposal {lib.proposals[0]['id']})",
        )
    ]
    assert len(proposals.list_proposals(engine)) == 1


def test_a_file_another_pending_proposal_changes_is_deferred_not_conflicted(geode_env):
    """A quote for a file whose links the Librarian rewrites: two proposals on the same bytes
    would conflict once one is applied, so the Corrector waits; after the Librarian's is
    approved, the next run proposes the quote."""
    before = b"---\nglobs: **/*.py\n---\n# Py\nSee [db](Database.md).\n"  # the same file in another case
    settings, engine, root = geode_env.files({"py.md": before, "database.md": b"---\ndescription: db\n---\n# DB\n"})
    lib = run_agent(settings, engine, "n1", "librarian")
    (lp,) = lib.proposals
    report = run_agent(settings, engine, "n1", "corrector")
    assert report.proposals == [] and report.examined["deferred"] == 1
    assert [(s.line, s.reason[:60]) for s in report.skipped] == [
        (5, f"the same edit is already proposed by the librarian (pending proposal {lp['id']})"[:60]),
        (2, f"deferred: pending proposal {lp['id']} changes this file and two proposals"[:60]),
    ]
    assert apply.approve(settings, engine, lp["id"], "person")["ok"]
    run_agent(settings, engine, "n2", "librarian")
    second = run_agent(settings, engine, "n2", "corrector")
    (p,) = second.proposals
    assert after_bytes(engine, p["id"]) == b'---\nglobs: "**/*.py"\n---\n# Py\nSee [db](database.md).\n'


# -- the bound ----------------------------------------------------------------------------------
def _many_links(n: int) -> bytes:
    return ("# Hub\n" + "".join(f"- see [[Old Name {i}]] for part {i}\n" for i in range(n))).encode()


def _targets(n: int) -> dict[str, bytes]:
    return {f"parts/new-name-{i}.md": f"---\naliases: [Old Name {i}]\n---\n# Part {i}\n".encode() for i in range(n)}


def _stored_links(settings, engine, n: int) -> None:
    d = settings.default_domain
    store_findings(
        engine,
        "r",
        "librarian",
        [
            Finding("broken-link", "hub.md", 2 + i, f"Old Name {i}", "gone", d, f"parts/new-name-{i}.md")
            for i in range(n)
        ],
    )


def test_an_edit_over_the_bound_is_a_finding_for_a_person_not_a_proposal(geode_env):
    n = MAX_LINES + 1
    settings, engine, root = geode_env.files({"hub.md": _many_links(n), **_targets(n)})
    _stored_links(settings, engine, n)
    report = run_agent(settings, engine, "r", "corrector")
    assert report.status == "ok"
    assert report.proposals == [] and proposals.list_proposals(engine) == []
    (f,) = [f for f in report.findings if f.kind == "correction-over-bound"]
    assert (f.path, f.line) == ("hub.md", 2)
    assert f"{n} lines would change, over the bound of {MAX_LINES} per file" in f.message
    assert f.message.count("\n+- see [[new-name-") == n  # the diff a person would have been shown
    assert report.examined["over_bound"] == 1
    assert [x.kind for x in load_findings(engine, "r", "corrector")] == ["correction-over-bound"]


def test_an_edit_at_the_bound_is_proposed(geode_env):
    n = MAX_LINES
    settings, engine, root = geode_env.files({"hub.md": _many_links(n), **_targets(n)})
    _stored_links(settings, engine, n)
    report = run_agent(settings, engine, "r", "corrector")
    (p,) = report.proposals
    assert report.examined["lines_changed"] == n
    assert changed_lines(_many_links(n).decode(), after_bytes(engine, p["id"]).decode()) == n
    assert f"{n} of at most {MAX_LINES} lines change" in proposals.get(engine, p["id"])["rationale"]


def test_a_frontmatter_value_that_is_not_one_line_is_left_for_a_person(geode_env):
    before = b"---\nglobs: **/*.py\n  src/**/*.py\n---\nBody\n"  # a plain scalar continued on the next line
    settings, engine, root = geode_env.files({"r.md": before})
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert report.proposals == []
    assert [(f.kind, f.path, f.line) for f in report.findings] == [("correction-not-mechanical", "r.md", 2)]
    assert "would break the note" in report.findings[0].message


def test_a_file_with_a_carriage_return_that_ends_no_line_is_left_for_a_person(geode_env):
    """A lone CR (LF CR line endings): the readers break a line there and the line editor does
    not, so no edit is made; each fix becomes a finding for a person, counted as not mechanical."""
    before = b"---\nname: db-host\ntype: fact\nlast_verified: 2020-01-01\n---\n# DB host\n\rThe primary is db-1.\n"
    settings, engine, root = geode_env.files({"r.md": before})
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert report.proposals == [] and (root / "r.md").read_bytes() == before
    mine = [f for f in report.findings if f.kind == "correction-not-mechanical"]
    assert mine and report.examined["not_mechanical"] == len(mine)
    for f in mine:
        assert f.path == "r.md" and f.message.endswith(
            "; the file has a carriage return that does not end a line (LF CR or CR line endings), "
            "which no edit is made on; for a person"
        ), f.message


# -- the essence is never reworded ------------------------------------------------------------------
def _essence_store(n: int) -> dict[str, bytes]:
    files = {"topics/new-home.md": b"---\nname: new-home\naliases: [Old Home]\n---\n# New home\n## Usage\nHere.\n"}
    for i in range(n):
        glob = "**/*.py" if i % 3 == 0 else '"**/*.md"'
        match = "| tail, |tail" if i % 4 == 0 else '"git push"'
        lv = "\nlast_verified: 2020-01-01\ntype: fact" if i % 5 == 0 else ""
        link = "See [[Old Home]] and [home](topics/old-home.md#usage) for more." if i % 2 == 0 else "No links."
        nl = "\r\n" if i % 7 == 0 else "\n"
        text = (
            f"---\nname: crystal-{i}\nglobs: {glob}{lv}\ncrystal:\n  deliver: act\n  on: bash\n  match: {match}\n"
            f"  who: all\n---\n<!-- crystal:essence -->\nRule {i}: keep the build honest, word for word. {link}\n"
            f"Second line of essence {i}, with `code` and *emphasis*.\n<!-- /crystal:essence -->\n\n"
            f"## Where this came from\nIncident {i}. [[Old Home]]\n"
        )
        files[f"crystals/c{i:02d}.md"] = text.replace("\n", nl).encode()
    return files


def test_a_store_full_of_essences_keeps_every_essence_word_for_word(geode_env):
    """24 crystals with unquoted globs, `match: |` terms, stale facts and links to a renamed note
    in their essences; three nights of upkeep with every proposal approved. The essences read
    word for word as before; only link targets changed."""
    from geode.kernel.note import parse_note

    n = 24
    files = _essence_store(n)
    settings, engine, root = geode_env.files(files)
    originals = {p: parse_note(b.decode(), p) for p, b in files.items()}
    filed = 0
    for night in ("n1", "n2", "n3"):
        run_agent(settings, engine, night, "librarian")
        rep = run_agent(settings, engine, night, "corrector")
        assert rep.status == "ok", rep.message
        filed += len(rep.proposals)
        for p in proposals.list_proposals(engine, status="pending"):
            assert apply.approve(settings, engine, p["id"], "person")["ok"]
    # 8 globs, 6 match terms and 5 stale facts fall on 14 files: one bounded proposal each
    assert filed == 14
    last = run_agent(settings, engine, "n4", "librarian"), run_agent(settings, engine, "n4", "corrector")
    assert [r.proposals for r in last] == [[], []]
    changed = 0
    for path, before in originals.items():
        if not path.startswith("crystals/"):
            continue
        data = (root / path).read_bytes()
        after = parse_note(data.decode("utf-8"), path)
        # the wikilink follows the alias new-home declares; the path link has no evidence of a
        # move (an alias never steers a path rewrite), so it stays as written, reported
        want = before.essence.replace("[[Old Home]]", "[[new-home|Old Home]]")
        assert after.essence == want, path
        assert mask_link_targets(after.essence) == mask_link_targets(before.essence)
        changed += after.essence != before.essence
        crlf = files[path].count(b"\r\n") > 0
        assert data.count(b"\r\n") == (data.count(b"\n") if crlf else 0), path  # line endings kept
    assert changed == n // 2  # exactly the essences holding links, and only their targets


def test_check_edit_refuses_a_changed_essence_word_and_allows_a_changed_target():
    before = (
        "---\nname: x\n---\n<!-- crystal:essence -->\nNever pipe into [[tail]] without pipefail.\n"
        "<!-- /crystal:essence -->\n"
    )
    assert check_edit(before, before.replace("[[tail]]", "[[tail-cmd|tail]]"), "x.md") == ""
    assert "essence's wording" in check_edit(before, before.replace("Never", "Rarely"), "x.md")
    assert "frontmatter" in check_edit(before, before.replace("name: x", "name: y"), "x.md")
    assert (
        check_edit(
            before,
            before.replace("name: x\n", "name: x\nreview_due: 2020-01-01\n"),
            "x.md",
            {"review_due": "2020-01-01"},
        )
        == ""
    )


def test_quote_value_and_file_lines_round_trip():
    assert quote_value("globs: **/*.py") == 'globs: "**/*.py"'
    assert quote_value("  - **/*.py") == '  - "**/*.py"'
    assert quote_value('match: | say "hi"') == "match: '| say \"hi\"'"
    assert quote_value("it's: @x  # note") == 'it\'s: "@x"  # note'
    assert quote_value('globs: "**/*.py"') is None
    assert quote_value("no value here") is None
    for text in ["", "a", "a\n", "a\r\nb", "\ufeff---\r\nx: 1\r\n---\r\n", "x\n\n\ny"]:
        assert FileLines(text).text() == text
    fl = FileLines("a\r\nb")
    fl.set(2, "c")
    assert (fl.get(1), fl.get(2), fl.get(3), fl.text()) == ("a", "c", None, "a\r\nc")


# -- the rule: no green over nothing ---------------------------------------------------------------
# -- reruns ----------------------------------------------------------------------------------------
def test_an_interrupted_attempt_is_finished_without_duplicates(tmp_path):
    """The first attempt filed its proposals and died before the report was written: the
    second attempt files none twice and lists the same ids."""
    from geode.agents.recording import begin_attempt
    from tests.stores import GeodeEnv

    settings, engine, root = GeodeEnv(tmp_path).files(
        {"a.md": b"---\nglobs: **/*.py\n---\nA.\n", "b.md": b"---\nglobs: **/*.sql\n---\nB.\n"}
    )
    run_agent(settings, engine, "cut", "librarian")
    agent = Corrector()
    from geode.agents.contract import Context

    first = agent.examine(Context(settings, engine, "cut", load_findings(engine, "cut")))
    assert begin_attempt(engine, "cut", "corrector")[0] == "run"
    store_findings(engine, "cut", "corrector", first.findings)
    for prop in first.proposed:
        prop.draft.run_id = "cut"
        prop.draft.evidence = [{"finding": f.id} for f in prop.findings]
        proposals.file_proposal(settings, engine, prop.draft)
    again = run_agent(settings, engine, "cut", "corrector")
    assert again.attempts == 2 and again.status == "ok"
    assert sorted(p["id"] for p in again.proposals) == sorted(p["id"] for p in corrector_props(engine, "cut"))
    assert len(again.proposals) == 2


def test_retired_notes_and_notes_no_longer_in_force_are_not_marked(geode_env):
    settings, engine, root = geode_env.files(
        {
            "old.md": b"---\nstatus: archived\nlast_verified: 2001-01-01\n---\nOld.\n",
            "was.md": b"---\nvalid_to: 2002-01-01\nlast_verified: 2001-01-01\n---\nHeld in 2001.\n",
            "live.md": b"---\nlast_verified: 2001-01-01\n---\nLive.\n",
        }
    )
    r = run_agent(settings, engine, "r", "corrector")
    assert [p["paths"] for p in r.proposals] == [["live.md"]]
    assert r.examined["stale_checked"] == 1


def test_a_value_with_a_colon_is_quoted_so_strict_yaml_reads_the_same_text(geode_env):
    """``description: Deploy checklist: what to verify`` is read as text by geode's reader
    (``unquoted-colon``) and rejected by strict YAML: one line, quoted."""
    import yaml

    before = b"---\nname: deploy\ndescription: Deploy checklist: what to verify\n---\n# Deploy\n\nBody.\n"
    settings, engine, root = geode_env.files({"deploy.md": before})
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert report.status == "ok", report.message
    (p,) = report.proposals
    want = b'---\nname: deploy\ndescription: "Deploy checklist: what to verify"\n---\n# Deploy\n\nBody.\n'
    assert after_bytes(engine, p["id"]) == want
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(before.decode().split("---")[1])
    assert yaml.safe_load(want.decode().split("---")[1])["description"] == "Deploy checklist: what to verify"
    approve_and_undo_exactly(settings, engine, root, p["id"])


def test_a_colon_in_a_value_continued_over_lines_is_left_to_a_person(geode_env):
    """Quoting the first line of a plain value continued on the next would end the value
    early; no mechanical one-line edit says the same, so the note is not touched."""
    before = b"---\nname: deploy\ndescription: Deploy checklist\n  for the release: what to verify\n---\n# Deploy\n"
    settings, engine, root = geode_env.files({"deploy.md": before})
    run_agent(settings, engine, "r", "librarian")
    report = run_agent(settings, engine, "r", "corrector")
    assert report.status == "ok", report.message
    assert report.proposals == []
    assert report.examined["findings_acted_on"] == 1, report.examined
    assert report.examined["not_mechanical"] == 1, report.examined
    assert (root / "deploy.md").read_bytes() == before
