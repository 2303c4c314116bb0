"""The contract every upkeep agent keeps, one test for all four (``geode.agents.upkeep.order()``).

- No green over nothing: an empty store, a store whose every note is unreadable (each file
  named, with its line) and a missing store folder fail loudly, and a failed run files nothing.
- Idempotent by run id: a rerun of the same run files nothing twice.
- The report says what it examined (the JSON a person's tools read), in hand-counted numbers.
- The next night files nothing new: after everything is approved (and then undone byte for
  byte), and while the first night's proposals are still pending.

Each agent gets the store it needs to have something to propose (``CASES``). Where an agent
differs, its case says so: the Gardener learns from the usage ledger alone, so with no ledger
rows it has nothing to learn (``nothing-to-learn``, never green), and once its rows are cited by
a proposal it drafts nothing from them again. Where an agent breaks the contract today, the
case is marked ``xfail(strict=True)`` with what it does, so the fix turns the mark red.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from geode.agents import upkeep
from geode.agents.contract import NOTHING_TO_LEARN, OK, Context, census, load_findings
from geode.agents.upkeep import load_agent, run_agent
from geode.queue import apply, proposals
from tests.stores import GeodeEnv, snapshot
from tests.test_gardener import DAY, END, Ledger, age_files, crystal
from tests.upkeep_helpers import FIXTURES, expected_of, fixture_env

AGENTS = upkeep.order()  # the built-in agents, in the order a night runs them


# -- the store each agent needs ------------------------------------------------------------------
def _fixture(name: str) -> Callable[[Path], GeodeEnv]:
    return lambda base: fixture_env(name, base)[0]


def _two_notes_a_person_must_fix(base: Path) -> GeodeEnv:
    """An unquoted glob strict YAML rejects, and a fact last verified in 2020."""
    return GeodeEnv(base, root="main").files(
        {
            "py.md": b"---\nglobs: **/*.py\n---\nPython.\n",  # a geode note: a Cursor rule (.mdc) is never quoted
            "fact.md": b"---\ntype: fact\nlast_verified: 2020-01-01\n---\nThe host is db-1.\n",
        }
    )


def _a_crystal_and_a_note(base: Path) -> GeodeEnv:
    """The folder is ``main``, the domain the Gardener's ledger rows name; files dated before
    the ledger window, so "changed inside the window" applies to none."""
    env = GeodeEnv(base, root="main").files({"a.md": crystal("a", "alpha"), "b.md": "# B\n"})
    age_files(env.root)
    return env


def _kubeconfig_hunted_three_times(env: GeodeEnv) -> None:
    """Three sessions in which the guard blocked a grep for kubeconfig: one group of lookups."""
    _ = env.engine  # the ledger rows go to the database, which must exist first
    L = Ledger(env.settings, env.root)
    for i in range(3):
        L.blocked(END - i * 3600, f"s{i}", "grep -rn kubeconfig {root}")
    L.opened(END - 40 * DAY)  # a ledger older than the Gardener's window: it files nothing from a younger one
    L.write()


def _no_rows(env: GeodeEnv) -> None:
    pass


def _links_without_a_suggestion(name: str) -> list[tuple[str, str, str]]:
    """EXPECTED.json's findings with no suggestion: what applying the Librarian's rewrites
    (which are exactly the suggested ones) leaves for a person."""
    return [
        (kind, path, target)
        for kind, path, _line, target, suggestion in expected_of("librarian", name)["findings"]
        if not suggestion
    ]


@dataclass(frozen=True)
class Case:
    agent: str
    #: the store it has something to propose in (files only)
    build: Callable[[Path], GeodeEnv]
    #: the proposals it files there in one night: (kind, first path), sorted
    proposed: list[tuple[str, str]]
    #: hand-counted ``examined`` values of that night (a count not listed may be anything)
    examined: dict[str, int]
    #: the findings (kind, path, target) of the next night once every proposal was approved: for a person
    left: list[tuple[str, str, str]]
    #: ledger rows the store comes with (the Gardener learns from these alone)
    ledger: Callable[[GeodeEnv], None] = _no_rows
    #: agents that run first in the same run id (the Corrector acts on their stored findings)
    before: tuple[str, ...] = ()
    #: the Gardener: no ledger rows is nothing-to-learn, and rows cited once are not drafted again
    learns_from_ledger: bool = False
    #: ``examined`` values of a second night while the first night's proposals are still pending
    pending_examined: dict[str, int] = field(default_factory=dict)
    #: marks for the pending-night test where the agent breaks the contract today
    pending_marks: tuple = ()


CASES = {
    # a vault whose two links with a suggestion are rewritten (EXPECTED.json, counted by hand)
    "librarian": Case(
        "librarian",
        _fixture("obsidian_vault"),
        proposed=[("edit", "Daily Notes/2026-09-17.md"), ("edit", "Meeting Notes.md")],
        examined=expected_of("librarian", "obsidian_vault")["examined"],
        left=_links_without_a_suggestion("obsidian_vault"),
    ),
    # two versions of one truth: a supersedes loop, two stale versions, a near-duplicate pair
    "cleaner": Case(
        "cleaner",
        _fixture("cleaner_truths"),
        proposed=[
            ("edit", "cache-ttl-b.md"),
            ("new_note", "restarting-workers.merge.md"),
            ("status", "deploy-window-2025.md"),
            ("status", "retry-cutoff-2025.md"),
        ],
        examined=expected_of("cleaner", "cleaner_truths")["examined"],
        # the pair stays two notes after its merge draft is approved: a person merges them
        left=[("near-duplicate", "restarting-workers.md", "worker-restart.md")],
    ),
    # one group of blocked lookups becomes a stub; a.md is a crystal, b.md a plain note
    "gardener": Case(
        "gardener",
        _a_crystal_and_a_note,
        ledger=_kubeconfig_hunted_three_times,
        learns_from_ledger=True,
        proposed=[("new_note", "stubs/lookup-kubeconfig.md")],
        examined={
            "notes": 2,
            "unreadable": 0,
            "crystals": 1,
            "ledger_rows": 4,
            "window_rows": 3,
            "window_days": 30,
            "window_first_ts": int(END - 2 * 3600),
            "window_last_ts": int(END),
            "ledger_first_ts": int(END - 40 * DAY),
            "sessions": 3,
            "rows_blocked": 3,
            "blocked_without_terms": 0,
            "blocked_groups": 1,
            "never_fired": 0,  # no delivery at all: too little ledger to judge
            "searched_notes": 0,
            "salience_judged": 0,
            "salience_at_bound": 0,
        },
        left=[],
    ),
    # the glob quoted (from the Librarian's frontmatter-not-yaml finding) and review_due added
    "corrector": Case(
        "corrector",
        _two_notes_a_person_must_fix,
        before=("librarian",),
        proposed=[("edit", "fact.md"), ("edit", "py.md")],
        examined={
            "notes": 2,
            "unreadable": 0,
            "findings_read": 1,
            "read:frontmatter-not-yaml": 1,
            "stale_checked": 1,  # py.md has no last_verified
            "findings_acted_on": 2,
            "fixes_proposed": 2,
            "notes_touched": 2,
            "lines_changed": 2,
            "already_proposed": 0,
            "deferred": 0,
            "over_bound": 0,
            "not_mechanical": 0,
            "awaiting_review": 0,
            "no_good_target": 0,
        },
        # what remains is for a person: re-verify the fact
        left=[("awaiting-review", "fact.md", "review_due"), ("stale", "fact.md", "last_verified")],
        pending_examined={"already_proposed": 2},
    ),
}


def case_store(agent: str, base: Path, ledger: bool = True) -> tuple[Case, GeodeEnv]:
    case = CASES[agent]
    env = case.build(base)
    if ledger:
        case.ledger(env)
    return case, env


def night(case: Case, env: GeodeEnv, run_id: str):
    """The agents ``case`` needs first, then the agent, all in ``run_id``; the agent's report."""
    for other in case.before:
        run_agent(env.settings, env.engine, run_id, other)
    return run_agent(env.settings, env.engine, run_id, case.agent)


def filed(case: Case, env: GeodeEnv, run_id: str) -> list[dict]:
    return proposals.list_proposals(env.engine, run_id=run_id, agent=case.agent)


def test_every_agent_a_night_runs_has_a_case():
    """The tests below run over ``upkeep.order()``: a new built-in agent without a case fails here."""
    assert sorted(CASES) == sorted(AGENTS) and len(AGENTS) == 4


# -- no green over nothing -------------------------------------------------------------------------
#: plain_notes' own file names (spaces included), each made unreadable; signals.md breaks on line 2
UNREADABLE = {
    p.name: (b"# Signals\n\xff bad utf-8\n" if p.name == "signals.md" else b"\xff\xfe binary \x00 not text")
    for p in (FIXTURES / "plain_notes").glob("*.md")
}


def failing_store(how: str, agent: str, base: Path) -> GeodeEnv:
    """A store the agent cannot examine, with the agent's ledger rows (so that a failure is the
    store's, not an empty ledger's)."""
    env = GeodeEnv(base, root="main")
    if how == "empty":
        env.write("notes.txt", "not a note\n")
    elif how == "unreadable":
        env.files(UNREADABLE)
    else:
        env.write("a.md", "# A\n")
    CASES[agent].ledger(env)
    _ = env.engine  # the records exist before the store is taken away
    if how == "missing":
        shutil.rmtree(env.root)
    return env


@pytest.mark.parametrize("agent", AGENTS)
def test_an_empty_store_fails_loudly(agent, tmp_path):
    env = failing_store("empty", agent, tmp_path)
    r = run_agent(env.settings, env.engine, "r", agent)
    assert r.status == "failed"
    assert "no note files" in r.message and f"{agent} examined no notes" in r.message


@pytest.mark.parametrize("agent", AGENTS)
def test_an_unreadable_store_fails_and_names_each_file(agent, tmp_path):
    env = failing_store("unreadable", agent, tmp_path)
    r = run_agent(env.settings, env.engine, "r", agent)
    assert len(UNREADABLE) == 5
    assert r.status == "failed" and "all 5 note files were unreadable" in r.message
    assert sorted((f.kind, f.path, f.line) for f in r.findings if f.kind == "unreadable") == sorted(
        ("unreadable", name, 2 if name == "signals.md" else 0) for name in UNREADABLE
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_a_missing_store_folder_fails(agent, tmp_path):
    env = failing_store("missing", agent, tmp_path)
    r = run_agent(env.settings, env.engine, "r", agent)
    assert r.status == "failed" and "cannot read the store folder" in r.message


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("how", ["empty", "unreadable", "missing"])
def test_a_failed_run_files_no_proposal_and_finds_nothing_but_the_unreadable_files(agent, how, tmp_path):
    """What a run could not see it cannot judge: its only findings are the files it could not read."""
    env = failing_store(how, agent, tmp_path)
    r = run_agent(env.settings, env.engine, "r", agent)
    assert r.status == "failed"
    assert [f.kind for f in r.findings] == ["unreadable"] * (len(UNREADABLE) if how == "unreadable" else 0)
    assert r.proposals == [] and proposals.list_proposals(env.engine) == []


# -- idempotent by run id --------------------------------------------------------------------------
@pytest.mark.parametrize("agent", AGENTS)
def test_a_rerun_of_the_same_run_id_files_nothing_twice(agent, tmp_path):
    case, env = case_store(agent, tmp_path)
    a = night(case, env, "same")
    b = night(case, env, "same")
    assert sorted((p["kind"], p["paths"][0]) for p in a.proposals) == case.proposed
    assert b.proposals == a.proposals and b.attempts == 1  # the finished report came back; nothing ran again
    assert len(filed(case, env, "same")) == len(a.proposals)
    # the same drafts filed again under the same run id are no-ops (the Gardener's rows are
    # cited by the proposal just filed: examined again, it drafts nothing from them)
    report = load_agent(agent, env.settings).examine(
        Context(env.settings, env.engine, "same", load_findings(env.engine, "same"))
    )
    assert len(report.proposed) == (0 if case.learns_from_ledger else len(a.proposals))
    for prop in report.proposed:
        prop.draft.run_id = "same"
        prop.draft.evidence = [{"finding": 1}]
        assert proposals.file_proposal(env.settings, env.engine, prop.draft) is None
    assert len(filed(case, env, "same")) == len(a.proposals)


# -- the report ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", AGENTS)
def test_the_report_says_what_it_examined(agent, tmp_path):
    case, env = case_store(agent, tmp_path)
    rep = night(case, env, "r")
    assert rep.status == OK, rep.message
    d = json.loads(json.dumps(rep.as_dict()))  # what `geode upkeep --json` prints
    assert (d["agent"], d["run_id"], d["status"]) == (agent, "r", OK)
    assert d["examined"]["notes"] == d["store_notes"] == census(env.settings).notes == case.examined["notes"]
    assert {k: d["examined"].get(k, 0) for k in case.examined} == case.examined
    assert len(d["proposals"]) == len(case.proposed)
    assert os.path.isdir(env.root)


@pytest.mark.parametrize("agent", AGENTS)
def test_with_no_ledger_rows_only_the_gardener_has_nothing_to_learn(agent, tmp_path):
    case, env = case_store(agent, tmp_path, ledger=False)
    report = night(case, env, "r")
    assert report.examined["notes"] == report.store_notes == case.examined["notes"]
    if case.learns_from_ledger:  # never green over an empty ledger
        assert report.status == NOTHING_TO_LEARN and report.status != OK
        assert report.message.startswith("nothing to learn from yet")
        assert report.examined["ledger_rows"] == 0
        assert report.proposals == [] and report.findings == []
    else:
        assert report.status == OK, report.message
        assert sorted((p["kind"], p["paths"][0]) for p in report.proposals) == case.proposed


# -- the next night ------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", AGENTS)
def test_the_next_night_after_approving_everything_files_nothing_new(agent, tmp_path):
    case, env = case_store(agent, tmp_path)
    settings, engine, root = env
    before = snapshot(root)
    first = night(case, env, "night-1")
    assert sorted((p["kind"], p["paths"][0]) for p in first.proposals) == case.proposed
    approved = []
    for p in proposals.list_proposals(engine, status="pending"):
        res = apply.approve(settings, engine, p["id"], "person")
        assert res["ok"], res
        assert (root / p["paths"][0]).exists()  # what it proposed is in the store now
        approved.append(p["id"])
    assert approved
    second = night(case, env, "night-2")
    assert second.status == OK, second.message
    assert second.proposals == [] and filed(case, env, "night-2") == []
    assert sorted((f.kind, f.path, f.target) for f in second.findings) == sorted(case.left)
    for pid in reversed(approved):
        res = apply.undo(settings, engine, pid, "person")
        assert res["ok"], res
    assert snapshot(root) == before


@pytest.mark.parametrize("agent", [pytest.param(a, marks=CASES[a].pending_marks) for a in AGENTS])
def test_the_next_night_files_nothing_again_while_the_first_nights_proposals_are_pending(agent, tmp_path):
    case, env = case_store(agent, tmp_path)
    first = night(case, env, "night-1")
    assert len(first.proposals) == len(case.proposed)
    second = night(case, env, "night-2")
    assert second.status == OK, second.message
    assert {k: second.examined.get(k, 0) for k in case.pending_examined} == case.pending_examined
    assert second.proposals == [] and filed(case, env, "night-2") == []
