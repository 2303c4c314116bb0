"""Issue 23's lint checks across crystals: two crystals where one fires whenever the other does
(the pair named), a ``who`` value that is neither a class nor a known agent type (with a
did-you-mean), more than ``[control] exempt_share`` of the store exempt, and the starter set
clean under all of them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geode.delivery.lint import lint_store
from tests.helpers import Geode

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "geode" / "delivery" / "starter"


@pytest.fixture()
def g(tmp_path) -> Geode:
    return Geode(tmp_path)


def _codes(r, code: str) -> list[dict]:
    return [p for p in r["problems"] if p["code"] == code]


def _lint_cli(g: Geode) -> tuple[int, dict]:
    env = g.env() | {"PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "geode", "lint", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    return r.returncode, json.loads(r.stdout)


def test_two_crystals_on_the_same_term_are_named_as_a_pair(g):
    g.crystal("a.md", "Quote the variable.", name="a", match='"rm -rf $"')
    g.crystal("b.md", "Check the variable is set.", name="b", match='"rm -rf $"')
    g.crystal("c.md", "Unrelated.", name="c", match='"git push --force"')
    r = lint_store(g.settings())
    [p] = _codes(r, "match-overlap")
    assert {p["path"]} <= {"a.md", "b.md"}
    other = "b.md" if p["path"] == "a.md" else "a.md"
    assert f"this crystal and {other} fire on exactly the same actions" in p["message"]
    assert p["severity"] == "warning"


def test_a_crystal_that_fires_whenever_a_narrower_one_does_is_named(g):
    g.crystal("push.md", "Any push.", name="push", match='"git push"')
    g.crystal("force.md", "A force push.", name="force", match='"git push --force"')
    r = lint_store(g.settings())
    [p] = _codes(r, "match-overlap")
    assert p["path"] == "force.md" and "push.md fires whenever this crystal does" in p["message"], p


def test_no_overlap_when_actions_or_terms_differ(g):
    g.crystal("a.md", "Bash.", name="a", match='"rm -rf $"')
    g.crystal("b.md", "Writes.", name="b", on="write", match='"rm -rf $"')
    g.crystal("c.md", "Other.", name="c", match='"rm -rf /tmp"')
    g.crystal("d.md", "Push.", name="d", match='"git push --force"')
    g.crystal("e.md", "Pull.", name="e", match='"git pull"')
    assert _codes(lint_store(g.settings()), "match-overlap") == []


def test_a_misspelt_who_is_a_finding_with_a_did_you_mean(g):
    g.crystal("a.md", "For everyone.", name="a", match='"git push --force"', who="everybdy")
    rc, r = _lint_cli(g)
    [p] = _codes(r, "who-unknown")
    assert p["path"] == "a.md" and p["line"] == 7 and p["severity"] == "error"  # the who: line
    assert "'everybdy'" in p["message"] and "did you mean 'all'?" in p["message"], p
    assert rc == 1


def test_a_who_naming_an_agent_type_the_ledger_has_seen_is_fine(g):
    g.crystal("a.md", "For explorers.", name="a", match='"git push --force"', who="Explorer")
    g.crystal("b.md", "For reviewers.", name="b", match='"git pull"', who="Reviewer")
    g.init_db()
    rc, r = _lint_cli(g)
    assert {p["path"] for p in _codes(r, "who-unknown")} == {"a.md", "b.md"}
    # a subagent of that type at work, through the hook: the ledger now knows the type
    res = g.bash("git push --force", agent_id="agent-1", agent_type="Explorer")
    assert "For explorers." in res.context
    assert [r["agent"] for r in g.rows("delivered")] == ["subagent:Explorer"]
    rc, r = _lint_cli(g)
    [p] = _codes(r, "who-unknown")
    assert p["path"] == "b.md", r["problems"]
    g.config('[delivery]\nagents = ["Reviewer"]\n')
    rc, r = _lint_cli(g)
    assert _codes(r, "who-unknown") == []


def test_more_than_the_exempt_share_is_a_warning(g):
    for i in range(9):
        g.crystal(f"n{i}.md", f"Note {i}.", name=f"n{i}", match=f'"tool{i} --go"')
    g.write(
        "safe.md",
        (g.store / "n0.md")
        .read_text()
        .replace("name: n0", "name: safe")
        .replace("crystal:\n", "crystal:\n  control: never\n"),
    )
    r = lint_store(g.settings())
    assert _codes(r, "exempt-share") == []  # 1 of 10 is the 10% line, not over it
    g.write(
        "safe2.md",
        (g.store / "n1.md")
        .read_text()
        .replace("name: n1", "name: safe2")
        .replace("crystal:\n", "crystal:\n  control: never\n"),
    )
    r = lint_store(g.settings())
    [p] = _codes(r, "exempt-share")
    assert "2 of 11 crystals (18%) say `control: never`" in p["message"] and "safe.md" in p["message"], p
    g.config("[control]\nexempt_share = 0.5\n")
    assert _codes(lint_store(g.settings()), "exempt-share") == []


def test_the_starter_set_lints_clean(tmp_path):
    store = tmp_path / "store"
    # the starter set as `geode init` writes it (the demo notes beside it hold problems on purpose)
    shutil.copytree(STARTER, store, ignore=shutil.ignore_patterns("demo"))
    g = Geode(tmp_path, store=False)
    env = g.env() | {"PYTHONPATH": str(ROOT), "GEODE_STORE": str(store)}
    r = subprocess.run(
        [sys.executable, "-m", "geode", "lint", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    out = json.loads(r.stdout)
    assert out["examined"]["crystals"] == len(list(STARTER.glob("*.md"))) >= 5
    assert r.returncode == 0
    # the one stated kind of finding: info lines on terms whose meaning changed from the substring rule
    assert [p for p in out["problems"] if p["severity"] != "info"] == [], out["problems"]
    assert {p["code"] for p in out["problems"]} <= {"match-meaning-changed"}
