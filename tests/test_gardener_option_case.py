"""The Gardener mints terms the way the term grammar reads them (``geode.delivery.match``):
words fold, a short option keeps its case. ``git branch -D`` deletes what ``-d`` refuses to, so a
minted ``-d`` would fire on the safe command and show the wrong flag (issue 24, issue 23)."""

from __future__ import annotations

from geode.agents.contract import OK
from geode.agents.upkeep import run_agent
from geode.delivery.match import term_matches
from geode.gardener.terms import clean_term, fold_term, pattern_terms
from tests.test_gardener import DAY, END, Ledger, after_bytes, binding_of, crystal, filed, make_env


def test_clean_term_keeps_short_options_as_written_and_folds_words():
    assert clean_term("git branch -D") == "git branch -D"
    assert clean_term("Chmod -R 777") == "chmod -R 777"
    assert clean_term("git add -A") == "git add -A"
    assert clean_term("git push --Force") == "git push --force"  # a long option folds, as the grammar does
    assert clean_term("Deploy Rollback") == "deploy rollback"
    assert fold_term("GIT Branch -D x") == "git branch -D x"
    assert pattern_terms("git branch -D") == ["git branch -D"]


def test_a_kept_option_still_tells_the_flags_apart():
    term = clean_term("git branch -D")
    assert term is not None
    assert term_matches(term, ("bash",), "git branch -D old-feature")
    assert not term_matches(term, ("bash",), "git branch -d old-feature")


def test_a_blocked_grep_for_an_option_becomes_a_stub_with_the_option_as_written(tmp_path):
    settings, engine, root = make_env(tmp_path, {"ci/pipes.md": crystal("pipes", '"| tail"')})
    L = Ledger(settings, root)
    t = END - 2 * DAY
    L.blocked(t + 60, "s1", 'grep -rn "git branch -D" {root}')
    L.blocked(t + 100, "s2", 'rg "git branch -D" {root}')
    L.opened()
    L.write()
    report = run_agent(settings, engine, "r1", "gardener")
    assert report.status == OK, report.message
    stubs = [p for p in filed(engine, "r1") if p["kind"] == "new_note"]
    assert len(stubs) == 1
    [(path, _before, after)] = after_bytes(engine, stubs[0]["id"])
    b, _note = binding_of(after, path)
    assert list(b.terms) == ["git branch -D"]


def test_a_bound_note_keeps_the_delivered_terms_option_case(tmp_path):
    settings, engine, root = make_env(
        tmp_path,
        {
            "git/branches.md": crystal("branches", '"git branch -D"'),
            "guides/cleanup.md": "# Cleaning up branches\n\nSome words.\n",
        },
    )
    L = Ledger(settings, root)
    t = END - 3 * DAY
    for i in range(3):
        s = f"s{i}"
        L.delivered(t + i * 1000, s, "main:git/branches.md", action="bash", term="git branch -D")
        L.searched(t + i * 1000 + 30, s, "delete merged branches", ["guides/cleanup.md"])
    L.opened()
    L.write()
    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == OK, report.message
    [p] = [p for p in report.proposals if p["paths"] == ["guides/cleanup.md"]]
    [(_path, _before, after)] = after_bytes(engine, p["id"])
    b, _note = binding_of(after, "guides/cleanup.md")
    assert list(b.terms) == ["git branch -D"]
