"""Proposals never do harm, and one night's queue is worth reading (issue 8).

- On every store fixture (a glob of ``tests/fixtures``: fixtures added later join by
  themselves): all four agents run, every proposal is approved, and no link that resolved
  before is broken after, no note's prose changed outside link targets and frontmatter, and the
  next nights file nothing new (what was pending, then undone, is held back and counted).
- The gate on its own (``geode.agents.filing``): a move that would leave links behind is not
  filed but becomes a finding; a rejected or undone proposal is not filed again; the same
  proposal on changed evidence is.
- ``geode upkeep`` fails whenever ``geode doctor`` would; ``geode init`` never writes the
  starter set into a folder that holds files.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from geode.agents import filing
from geode.agents.contract import Agent, Context, Finding, Proposed, Report
from geode.agents.upkeep import run_agent, run_upkeep
from geode.kernel.store import load_store
from geode.links.resolver import StoreLinks
from geode.queue import apply, proposals
from geode.queue.proposals import FileChange, ProposalDraft
from tests.stores import NO_BACKGROUND_BUILD, GeodeEnv
from tests.upkeep_helpers import FIXTURES, fixture_env

NOTE_SUFFIXES = (".md", ".mdc", ".markdown")


def store_fixtures() -> list[str]:
    """The store fixtures: every folder under tests/fixtures that holds a note file (at any
    depth), or an ``EXPECTED.json`` beside no notes (a store generated at test time, like
    ``flat``). Folders of expected outputs (``*_expected``: only .json) are not stores."""
    out = []
    for d in sorted(FIXTURES.iterdir()):
        if not d.is_dir():
            continue
        notes = any(p.is_file() and p.name.lower().endswith(NOTE_SUFFIXES) for p in d.rglob("*"))
        if notes or (d / "EXPECTED.json").is_file():
            out.append(d.name)
    return out


STORES = store_fixtures()


def test_the_glob_finds_the_store_fixtures():
    assert len(STORES) >= 8, STORES  # fails rather than parametrize over nothing
    assert "obsidian_vault" in STORES and "flat" in STORES
    assert not [s for s in STORES if s.endswith("_expected")]


# -- what the test compares -----------------------------------------------------------------------
def ok_links(settings) -> Counter:
    """``(source, destination)`` of every link that resolves, counted, over every domain."""
    out: Counter = Counter()
    for domain, root in settings.domain_roots():
        load = load_store(root, domain)
        links = StoreLinks(load)
        for n in load.notes:
            for ref in links.refs(n):
                res = links.resolve(n, ref)
                if res.status == "ok" and (res.path in links.notes or res.path in links.files):
                    out[(domain, n.path, res.path)] += 1
    return out


_LINKISH = [
    re.compile(r"\[\[[^\]\n]*\]\]"),  # wikilinks
    re.compile(r"\]\([^)\n]*(?:\([^)\n]*\)[^)\n]*)*\)"),  # a markdown link's target
    re.compile(r"^\s*\[[^\]\n]+\]:\s*\S.*$", re.M),  # reference definitions
    re.compile(r"`[^`\n]*`"),  # code spans: path mentions
]


def prose(text: str) -> str:
    """The note's text without frontmatter and without link targets: what a proposal must not change."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            text = text[text.find("\n", end + 1) + 1 :]
    for rx in _LINKISH:
        text = rx.sub("", text)
    return text


def note_texts(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8", errors="replace")
        for p in root.rglob("*")
        if p.is_file() and p.name.lower().endswith(NOTE_SUFFIXES)
    }


def _changes(engine, pid: int) -> tuple:
    """What a proposal does to the files: (path, sha256 before, sha256 after), sorted."""
    return tuple(sorted((c["path"], c["before_sha"], c["after_sha"]) for c in proposals.get(engine, pid)["changes"]))


def filed_in(reports) -> int:
    return sum(len(r.proposals) for r in reports)


# -- every fixture ----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", STORES)
def test_approving_a_whole_night_does_no_harm_and_the_next_nights_file_nothing(name, tmp_path):
    env, _ = fixture_env(name, tmp_path)
    settings, engine, root = env
    links_before = ok_links(settings)
    texts_before = note_texts(root)
    assert texts_before, f"{name}: the store holds no notes"

    night1 = run_upkeep(settings, engine, "night-1")
    assert all(r.status in ("ok", "nothing-to-learn") for r in night1), [(r.agent, r.message) for r in night1]
    first = filed_in(night1)

    # while the first night's proposals are pending: nothing filed again, the drafts held back
    pending = run_upkeep(settings, engine, "night-1b")
    assert filed_in(pending) == 0, [(r.agent, r.proposals) for r in pending]
    gated = sum(len(r.proposals) for r in night1 if r.agent in ("librarian", "cleaner"))
    held = sum(r.held_back.get("pending", 0) for r in pending)
    assert held >= gated, (held, gated)

    # approve every proposal (a later one on a file an earlier one changed is a conflict: nothing written)
    moves: dict[str, str] = {}
    applied = []
    for p in proposals.list_proposals(engine, status="pending"):
        res = apply.approve(settings, engine, p["id"], "person")
        assert res["ok"] or res["status"] == "conflict", res
        if res["ok"]:
            applied.append(p["id"])
            full = proposals.get(engine, p["id"])
            gone = [c["path"] for c in full["changes"] if c["op"] == "delete"]
            made = [c["path"] for c in full["changes"] if c["op"] == "create"]
            if len(gone) == 1 and len(made) == 1:
                moves[gone[0]] = made[0]
    assert bool(applied) == bool(first)

    # no link that resolved before is broken after (moves followed)
    links_after = ok_links(settings)
    lost = []
    for (dom, src, dest), n in links_before.items():
        key = (dom, moves.get(src, src), moves.get(dest, dest))
        if links_after[key] < n:
            lost.append((src, dest, n, links_after[key]))
    assert lost == [], f"{name}: links that resolved before and not after: {lost[:10]}"

    # no note's prose changed outside link targets and frontmatter
    texts_after = note_texts(root)
    changed = [
        p
        for p, text in texts_before.items()
        if moves.get(p, p) in texts_after and prose(texts_after[moves.get(p, p)]) != prose(text)
    ]
    assert changed == [], f"{name}: prose changed in {changed}"
    assert all(moves.get(p, p) in texts_after for p in texts_before), "a note disappeared"

    # the next night files nothing new
    night2 = run_upkeep(settings, engine, "night-2")
    assert filed_in(night2) == 0, [(r.agent, r.proposals) for r in night2]

    # undone, the night after does not file them again: held back as undone (an agent may now
    # propose what it passed over while another's proposal held the file: new, never a repeat)
    earlier = {_changes(engine, p["id"]) for p in proposals.list_proposals(engine)}
    for pid in reversed(applied):
        assert apply.undo(settings, engine, pid, "person")["ok"]
    night3 = run_upkeep(settings, engine, "night-3")
    again = [p for r in night3 for p in r.proposals if _changes(engine, p["id"]) in earlier]
    assert again == [], again
    if applied:
        assert sum(r.held_back.get("undone", 0) for r in night3) > 0


# -- the gate on its own -------------------------------------------------------------------------------
def _store_with_a_linked_note(base: Path) -> GeodeEnv:
    return GeodeEnv(base, root="main").files(
        {
            "guide/old.md": "---\nstatus: deprecated\n---\n# Old\n\n## Keep\n\nText.\n",
            "index.md": "# Index\n\n- [old](guide/old.md)\n- [keep](guide/old.md#keep)\n",
            "other.md": "# Other\n\nSee [[old]].\n",
        }
    )


def _draft(kind: str, changes: list[FileChange], key: str) -> ProposalDraft:
    return ProposalDraft("tester", kind, "main", f"{kind} {key}", "by hand", [], changes, "r", key)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_move_that_leaves_links_behind_is_a_finding_not_a_proposal(tmp_path):
    settings, engine, root = _store_with_a_linked_note(tmp_path)
    old = (root / "guide/old.md").read_bytes()
    index = (root / "index.md").read_bytes()
    bare = _draft(
        "archive", [FileChange("archive/guide/old.md", None, old), FileChange("guide/old.md", _sha(old), None)], "a"
    )
    rewritten = _draft(
        "archive",
        [
            FileChange("archive/guide/old.md", None, old),
            FileChange("guide/old.md", _sha(old), None),
            FileChange(
                "index.md",
                _sha(index),
                index.replace(b"(guide/old.md)", b"(archive/guide/old.md)").replace(
                    b"(guide/old.md#keep)", b"(archive/guide/old.md#keep)"
                ),
            ),
        ],
        "b",
    )
    # a rewrite into a form that does not resolve
    wrong = _draft(
        "edit", [FileChange("index.md", _sha(index), index.replace(b"(guide/old.md)", b"(guide/olde.md)"))], "c"
    )
    # a heading dropped that a link names
    dropped = _draft("edit", [FileChange("guide/old.md", _sha(old), old.replace(b"## Keep\n", b""))], "d")
    for draft, harmful in ((bare, True), (rewritten, False), (wrong, True), (dropped, True)):
        report = Report(agent="tester", proposed=[Proposed(draft, [Finding("x", "guide/old.md", 0, draft.key)])])
        filing.screen(Context(settings, engine, "r"), "tester", report)
        if harmful:
            assert report.proposed == [] and report.held_back == {"would-break-links": 1}, draft.key
            [f] = [f for f in report.findings if f.kind == filing.HARM_FINDING]
            assert f.message.startswith(f"not filed: {draft.title}") and "would" in f.message
        else:
            assert len(report.proposed) == 1 and report.held_back == {} and report.findings == []
    # the bare move names what it breaks: the two path links of index.md
    report = Report(agent="tester", proposed=[Proposed(bare, [])])
    filing.screen(Context(settings, engine, "r"), "tester", report)
    assert (
        "2 of the 2 link(s) in index.md to guide/old.md (moved to archive/guide/old.md)" in report.findings[0].message
    )


class Stamper(Agent):
    """A test agent (``[upkeep] agents``) that always drafts the same thing: ``status: stable``
    on ``a.md``, resting on one finding. The gate, not the agent, must keep it from the queue."""

    name = "stamp"

    def examine(self, ctx) -> Report:
        from geode.queue.changes import set_frontmatter_status

        report = Report(agent=self.name)
        report.examined["notes"] = 0
        for domain, load in ctx.readable(report):
            report.examined["notes"] += len(load.notes)
            data = (Path(load.root) / "a.md").read_bytes()
            f = Finding("needs-status", "a.md", 0, "a.md", "no status", domain)
            report.findings.append(f)
            change = FileChange("a.md", _sha(data), set_frontmatter_status(data, "stable", "a.md"))
            draft = ProposalDraft(
                self.name, "status", domain, "Stable a.md", "by rule", [], [change], ctx.run_id, "stamp:a"
            )
            report.proposed.append(Proposed(draft, [f]))
        return report


def _stamp_store(base: Path) -> GeodeEnv:
    env = GeodeEnv(base, root="main").files({"a.md": "# A\n\nSee [b](b.md).\n", "b.md": "# B\n"})
    env.toml('[upkeep]\nagents = { stamp = "tests.test_no_harm:Stamper" }\n')
    return env


def _night(settings, engine, run_id):
    return run_agent(settings, engine, run_id, "stamp")


def test_a_rejected_proposal_is_not_filed_again(tmp_path):
    settings, engine, root = _stamp_store(tmp_path)
    first = _night(settings, engine, "n1")
    [p] = first.proposals
    assert proposals.get(engine, p["id"])["status"] == "pending"
    from geode.queue.review import reject

    assert reject(settings, engine, p["id"], "person")["ok"]
    second = _night(settings, engine, "n2")
    assert second.proposals == [] and second.held_back == {"rejected": 1}
    assert second.as_dict()["held_back"] == {"rejected": 1}


def test_an_undone_proposal_is_not_filed_again_until_its_evidence_changes(tmp_path):
    settings, engine, root = _stamp_store(tmp_path)
    [p] = _night(settings, engine, "n1").proposals
    assert apply.approve(settings, engine, p["id"], "person")["ok"]
    assert apply.undo(settings, engine, p["id"], "person")["ok"]
    second = _night(settings, engine, "n2")
    assert second.proposals == [] and second.held_back == {"undone": 1}
    # the file changed (evidence changed): the proposal is filed again, for the file as it is now
    (root / "a.md").write_text("# A\n\nSee [b](b.md). And more.\n", encoding="utf-8")
    third = _night(settings, engine, "n3")
    assert len(third.proposals) == 1 and third.held_back == {}
    assert third.proposals[0]["paths"] == ["a.md"]


def test_held_back_is_kept_with_the_report_and_printed(tmp_path):
    from geode.agents.contract import get_report, list_runs
    from geode.cli.upkeep_cmds import render_report

    settings, engine, root = _stamp_store(tmp_path)
    _night(settings, engine, "n1")
    _night(settings, engine, "n2")
    kept = get_report(engine, "n2", "stamp")
    assert kept is not None and kept.held_back == {"pending": 1} and "__held_back__" not in kept.examined
    assert [r["held_back"] for r in list_runs(engine) if r["run_id"] == "n2"] == [{"pending": 1}]
    assert "held back 1: already pending 1" in render_report(kept.as_dict())


def test_the_evidence_fingerprint_changes_with_the_change_and_the_evidence():
    base = dict(domain="d", kind="edit", changes=[("x.md", "1", "2")], findings=[("k", "x.md", "t")], ledger_events=[3])
    fp = filing.fingerprint(**base)
    assert fp == filing.fingerprint(**{**base, "changes": [("x.md", "1", "2")], "ledger_events": [3, 3]})
    assert fp == filing.fingerprint(**{**base, "kind": "status"})  # a status change is an edit of the same bytes
    for change in (
        {"changes": [("x.md", "1", "3")]},
        {"changes": [("y.md", "1", "2")]},
        {"kind": "archive"},
        {"findings": [("k", "x.md", "u")]},
        {"ledger_events": [4]},
    ):
        assert filing.fingerprint(**{**base, **change}) != fp, change


# -- the command line ------------------------------------------------------------------------------------
def _geode(*argv, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update(GEODE_HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    return subprocess.run(
        [sys.executable, "-m", "geode", *argv], capture_output=True, text=True, env=env, timeout=300, cwd=cwd
    )


@pytest.mark.slow
def test_upkeep_on_a_fresh_store_says_the_index_is_pending_and_exits_0(tmp_path):
    import json

    store = tmp_path / "store"
    store.mkdir()
    (store / "a.md").write_text("# A\n\nA note.\n", encoding="utf-8")
    home = tmp_path / "home"
    # no recall index yet: doctor fails (prompt-time recall would hand over nothing); upkeep ran
    # its agents, says the index is pending, and exits 0 (issue 21: a first night is no failure)
    r = _geode("upkeep", "--store", str(store), "--agent", "librarian", home=home, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "== librarian: OK" in r.stdout
    assert "index pending  recall: the recall index is empty" in r.stdout, r.stdout
    assert "geode doctor would fail" not in r.stdout
    j = _geode("upkeep", "--store", str(store), "--agent", "librarian", "--json", home=home, cwd=tmp_path)
    assert j.returncode == 0 and json.loads(j.stdout)["agents_ok"] is True
    assert "recall" in json.loads(j.stdout)["pending"]
    d = _geode("doctor", "--store", str(store), "--skip-model", home=home, cwd=tmp_path)
    assert d.returncode == 1 and "recall" in d.stdout
    # set up: both pass
    assert _geode("init", str(store), home=home, cwd=tmp_path).returncode == 0
    r = _geode("upkeep", "--store", str(store), "--agent", "librarian", "--json", home=home, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["doctor"] == {"ok": True, "failed": []}


@pytest.mark.slow
def test_init_never_writes_starter_notes_into_a_folder_that_holds_files(tmp_path):
    store = tmp_path / "rules"
    (store / ".cursor" / "rules").mkdir(parents=True)
    (store / ".cursor" / "rules" / "python.mdc").write_text("---\nglobs: '*.py'\n---\nUse ruff.\n", encoding="utf-8")
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    r = _geode("init", str(store), home=tmp_path / "home", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "already holds files: indexed what is there, no starter notes written" in r.stdout
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
    # nor does geode run
    r = _geode("run", "--store", str(store), home=tmp_path / "home", cwd=tmp_path)
    assert "no starter notes written" in r.stdout, r.stdout + r.stderr
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
    # an empty folder still gets the starter set
    empty = tmp_path / "fresh"
    empty.mkdir()
    r = _geode("init", str(empty), home=tmp_path / "home2", cwd=tmp_path)
    assert r.returncode == 0 and any(empty.glob("*.md")), r.stdout
