"""Every command of the README's "A quick tour", read from README.md and run in a fresh
GEODE_HOME and HOME through subprocesses (``tests/readme_tour.py``): each exits as documented
(0; ``lint`` may exit 1 only where the README says so), prints something a person can read (no
traceback, no Python dict, no epoch seconds), and ``--json`` prints JSON. A README edit that
breaks a tour command fails here (issue 14). The queue steps must also do what they are for
(issue 24): ``init --demo`` writes the demo notes, ``upkeep`` files at least three proposals,
``show`` prints a diff, ``approve`` changes the store and ``undo`` restores every byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import readme_tour as T

LINES = T.tour_lines()


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> dict[int, T.TourRun]:
    work = tmp_path_factory.mktemp("tour")
    return {r.line.line: r for r in T.run_tour(work, before=T.BEFORE)}


def test_the_tour_is_found_and_covers_the_first_hour():
    """Not green over an empty block: the tour holds the set-up, delivery, recall, upkeep, web."""
    firsts = {" ".join(tl.words[:2]) for tl in LINES}
    assert len(LINES) >= 15
    for must in ("geode init", "geode hooks", "geode deliver", "geode lint", "geode search", "geode upkeep"):
        assert must in firsts, f"the README's tour lost {must!r}"
    assert LINES[0].words[0] == "export"
    # the queue steps, on a store that gives upkeep work (issue 24: on the bare starter set the
    # queue was empty, and approve had nothing to approve)
    words = [tl.words for tl in LINES]
    assert ["geode", "init", "--demo"] in words
    for step in ("show", "approve", "undo"):
        assert ["geode", "proposals", step, "ID"] in words, f"the tour lost `geode proposals {step} ID`"
    assert T.DEMO_NOTES and T.BEFORE == {}  # nothing seeded by hand: the tour's own init gives the work


def test_a_step_that_runs_but_does_nothing_is_caught(tmp_path):
    """The meaning checks themselves: upkeep that proposes too little, approve that changes no
    file, undo that leaves other bytes each fail with a FAILED note, which ``problems_of`` reports."""
    home = tmp_path / "geode-home"
    (home / "store").mkdir(parents=True)
    (home / "store" / "a.md").write_bytes(b"before\n")
    state = {"approved": 1, "before": {"a.md": b"before\n"}}
    (home / "store" / "a.md").write_bytes(b"after, not undone\n")
    notes = T.meaning_of(["geode", "proposals", "undo", "1"], "proposal 1 undone.", {}, tmp_path, home, state)
    assert any(n.startswith("FAILED: undo did not restore") for n in notes)
    (home / "store" / "a.md").write_bytes(b"before\n")
    assert T.meaning_of(["geode", "proposals", "undo", "1"], "", {}, tmp_path, home, state) == [
        "undo restored every byte"
    ]
    show = T.meaning_of(["geode", "proposals", "show", "1"], "proposal 1: nothing\n", {}, tmp_path, home, state)
    assert show == ["FAILED: show printed no diff line"]
    tl = next(t for t in LINES if t.words[:3] == ["geode", "proposals", "undo"])
    assert T.problems_of(T.TourRun(tl, [], 0, "proposal 1 undone: every byte is back as it was\n", "", 0.0, notes))


@pytest.mark.slow
@pytest.mark.parametrize("tl", [tl for tl in LINES if tl.words[0] == "geode"], ids=lambda tl: " ".join(tl.words[:3]))
def test_each_tour_command_runs_as_documented(tour, tl):
    run = tour[tl.line]
    assert T.problems_of(run) == []


@pytest.mark.slow
def test_the_tour_wrote_into_its_own_homes(tour):
    """The hooks and MCP entries went to the temporary HOME and project, as the README says."""
    run = next(r for r in tour.values() if r.line.words[:3] == ["geode", "hooks", "install"] and len(r.line.words) == 3)
    work = Path(run.stdout.split(" written to ")[1].split("/project/")[0])
    for f in (
        "project/.claude/settings.local.json",
        "user/.claude.json",
        "user/.codex/hooks.json",
        "user/.codex/config.toml",
    ):
        assert (work / f).is_file(), f


@pytest.mark.slow
def test_a_broken_tour_command_is_caught(tmp_path):
    """The check itself: a README whose tour holds a command that fails, a dict printed for
    people, or JSON that is not, is reported with its README line."""
    readme = "\n".join(
        [
            "# x",
            T.TOUR_HEADING,
            "",
            "```sh",
            "export GEODE_HOME=/tmp/geode-tour",
            "geode init",
            "geode frobnicate                 # a command that does not exist",
            "geode lint                       # exit 1 when a crystal can never fire",
            "```",
        ]
    )
    runs = T.run_tour(tmp_path, readme=readme)
    assert [r.line.words[1] for r in runs] == ["init", "frobnicate", "lint"]
    assert T.problems_of(runs[0]) == []
    bad = T.problems_of(runs[1])
    assert bad and bad[0].startswith("README.md:7 `geode frobnicate") and "exit 2" in bad[0]
    fake = T.TourRun(runs[2].line, [], 0, "notes {'links_to': 1} at 1796044214.56\n" * 2, "", 0.0)
    assert any("raw Python values" in p for p in T.problems_of(fake))
    fake_exit = T.TourRun(runs[2].line, [], 1, "examined 9 notes; 1 errors\nx.md:3: error: never fires\n", "", 0.0)
    assert T.problems_of(fake_exit) == []  # lint's exit 1 is documented on its line
    undocumented = T.TourRun(runs[0].line, [], 1, "geode home /x\nsome error happened here\n", "", 0.0)
    assert T.problems_of(undocumented)
