"""The one walk of a team's repository (``geode.kernel.team_rules.walk``): the Cursor rules
``discover`` finds and the paths ``repo_files`` gives lint are read by the same walk, so they
agree on what a folder holds, in one order, within the limit asked for."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from geode.kernel import team_rules as tr

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "team_repo"


def test_repo_files_stops_at_its_limit_and_keeps_one_order(tmp_path):
    for i in range(7):
        (tmp_path / f"f{i}.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.ts").write_text("x")
    assert tr.repo_files(str(tmp_path), limit=3) == ["f0.txt", "f1.txt", "f2.txt"]  # at most 3, by name
    assert tr.repo_files(str(tmp_path)) == [*(f"f{i}.txt" for i in range(7)), "sub/a.ts"]


def test_discover_and_repo_files_see_the_same_rules(tmp_path):
    repo = tmp_path / "acme"
    shutil.copytree(FIXTURE, repo)
    nested = repo / ".cursor" / "rules" / "backend" / "deep"
    nested.mkdir(parents=True)
    (nested / "sql.mdc").write_text("---\ndescription: SQL style\n---\nUpper-case keywords.\n")
    (repo / ".cursor" / "rules" / "notes.txt").write_text("not a rule")
    os.symlink(repo / ".cursor" / "rules" / "backend", repo / ".cursor" / "rules" / "linked")  # never entered
    rules = [rel for rel, kind in tr.discover(str(repo)) if kind == tr.CURSOR_RULE]
    listed = [f for f in tr.repo_files(str(repo)) if f.startswith(".cursor/rules/") and f.endswith(".mdc")]
    assert sorted(rules) == sorted(listed)
    assert ".cursor/rules/backend/deep/sql.mdc" in rules
    assert not any(r.startswith(".cursor/rules/linked/") for r in rules)
