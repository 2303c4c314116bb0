"""``geode lint`` under the term grammar (issue 23): terms shown as written, never folded; two
terms that differ only by an option's case are two terms; terms that share a long option are
not "the same term"; the starter set passes the term checks."""

from __future__ import annotations

import os
import shutil

from geode.delivery import match
from geode.delivery.lint import lint_store
from tests.helpers import Geode

STARTER = os.path.join(os.path.dirname(match.__file__), "starter")


def _problems(r: dict, path: str) -> list[dict]:
    return [p for p in r["problems"] if p["path"] == path]


def test_lint_shows_every_term_as_written(tmp_path):
    g = Geode(tmp_path)
    g.crystal("git.md", "x", name="bare-git", match='"GIT"')  # a common word: too broad
    r = lint_store(g.settings())
    msgs = [p["message"] for p in _problems(r, "git.md") if p["code"] == "match-too-broad"]
    assert msgs and all("'GIT'" in m for m in msgs), msgs


def test_an_options_case_makes_two_terms_and_a_shared_long_option_makes_no_duplicate(tmp_path):
    g = Geode(tmp_path)
    g.crystal("branch.md", "x", name="branch", match='"git branch -D, git branch -d"')
    g.crystal("force.md", "x", name="force", match='"git push --force, npm install --force"')
    r = lint_store(g.settings())
    for path in ("branch.md", "force.md"):
        assert "match-duplicate-term" not in {p["code"] for p in _problems(r, path)}, _problems(r, path)


def test_the_starter_set_passes_the_term_checks(tmp_path):
    g = Geode(tmp_path)
    for name in os.listdir(STARTER):
        if name.endswith(".md"):
            shutil.copy(os.path.join(STARTER, name), g.store / name)
    r = lint_store(g.settings())
    term_codes = {"match-never", "match-unreachable", "match-duplicate-term", "match-never-fires"}
    bad = [p for p in r["problems"] if p["code"] in term_codes]
    assert bad == []
    assert r["problems"] is not None and any(p for p in os.listdir(g.store) if p.endswith(".md"))


def test_a_term_no_form_of_its_command_reaches_is_named(tmp_path):
    # a comment holds no shell word: nothing reaches it, and lint names it as written
    assert match.unreachable("# Force Push", "bash")
    assert match.unreachable("git push --force", "bash") == []
    assert match.unreachable("curl | sh", "bash") == []
    assert match.unreachable("exact:git push --force", "bash") == []
    g = Geode(tmp_path)
    g.crystal("c.md", "x", name="comment-term", match='"# Force Push"')
    r = lint_store(g.settings())
    codes = {p["code"] for p in _problems(r, "c.md")}
    assert "match-unreachable" in codes and "match-never-fires" in codes
    assert any("'# Force Push'" in p["message"] for p in _problems(r, "c.md"))
