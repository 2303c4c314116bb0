"""The rules a team already has (issue 27): Cursor rules, CLAUDE.md / AGENTS.md sections and a
Claude skill, read in place as a domain of their own, delivered through the real hook and the
ledger, found by recall, checked by lint, and never changed or moved by anything geode runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geode.delivery import team_sync
from geode.kernel import team_rules as tr
from tests.helpers import Geode

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "team_repo"
REPO_ROOT = Path(__file__).resolve().parent.parent

#: the team files of the fixture, as the tools' documentation lays them out
TEAM_FILES = [
    ".claude/skills/release-notes/SKILL.md",
    ".cursor/rules/db-migrations.mdc",
    ".cursor/rules/project-core.mdc",
    ".cursor/rules/python-tests.mdc",
    ".cursor/rules/typescript.mdc",
    "AGENTS.md",
    "CLAUDE.md",
]


def hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (the whole repository, not only the team files: a
    file moved or added is a change too)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def team(tmp_path):
    repo = tmp_path / "acme"
    shutil.copytree(FIXTURE, repo)
    g = Geode(tmp_path, config=f'[domains]\nmain = "store"\n\n[team_rules]\nacme = "{repo}"\n')
    g.crystal("ops/deploy.md", "Deploys go out from main only.", on="bash", match="deploy")
    g.init_db()
    return g, repo


def cli(g: Geode, *args: str, withhold: str = "0") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "geode", *args],
        env=g.env(withhold),
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_fixture_holds_each_tools_files():
    found = [rel for rel, _kind in tr.discover(str(FIXTURE))]
    assert sorted(found) == TEAM_FILES
    kinds = {s.source: s.kind for rel, kind in tr.discover(str(FIXTURE)) for s in _read(rel, kind)}
    assert kinds[".cursor/rules/project-core.mdc"] == tr.ALWAYS
    assert kinds[".cursor/rules/typescript.mdc"] == tr.GLOBS
    assert kinds[".cursor/rules/db-migrations.mdc"] == tr.REQUESTED
    assert kinds[".claude/skills/release-notes/SKILL.md"] == "skill"


def _read(rel: str, kind: str) -> list[tr.Section]:
    return tr.read_file(str(FIXTURE), rel, kind, (FIXTURE / rel).read_text(encoding="utf-8"))[0]


def test_edit_of_a_matching_file_delivers_the_rule_through_the_real_hook(team):
    g, repo = team
    before, fixture_before = hashes(repo), hashes(FIXTURE)
    g.cwd = repo  # the agent works in the team's repository
    hit = g.tool("Edit", {"file_path": str(repo / "src/cart.ts"), "old_string": "a", "new_string": "b"})
    assert "Money is an integer count of cents" in hit.context, hit
    assert "src/**/*.ts" in hit.context
    # a relative path, a Write, the second glob of the rule (comma-separated, as Cursor writes it)
    hit2 = g.tool("Write", {"file_path": "src/components/Button.tsx", "content": "export {}"}, session="s2")
    assert "Money is an integer count of cents" in hit2.context
    # a file no glob matches: nothing of the rule
    miss = g.tool("Edit", {"file_path": str(repo / "README.md"), "old_string": "a", "new_string": "b"}, session="s3")
    assert "integer count of cents" not in miss.stdout
    # python-tests.mdc matches tests/**/*.py and not src/
    py = g.tool("Edit", {"file_path": str(repo / "tests/cart_check.py"), "old_string": "a", "new_string": "b"})
    assert "pytest fixtures" in py.context and "integer count of cents" not in py.context
    boot = g.run("SessionStart", session="s4", source="startup")
    assert "Acme storefront: a TypeScript web app" in boot.context
    rows = g.rows("delivered")
    ts = [r for r in rows if r["crystal_id"] == "acme:cursor/typescript.md"]
    assert [(r["session"], r["action"], r["term"], r["channel"]) for r in ts] == [
        ("s1", "edit", "src/**/*.ts", "act"),
        ("s2", "write", "src/**/*.tsx", "act"),
    ]
    assert all(r["domain"] == "acme" and r["content_hash"] and r["chars"] > 0 for r in ts)
    assert any(r["crystal_id"] == "acme:cursor/project-core.md" and r["channel"] == "boot" for r in rows)
    assert not [r for r in rows if r["session"] == "s3" and r["domain"] == "acme"]
    assert hashes(repo) == before and hashes(FIXTURE) == fixture_before


def test_control_arm_withholds_team_rules_like_any_crystal(team):
    g, repo = team
    hit = g.tool("Edit", {"file_path": str(repo / "src/cart.ts"), "old_string": "a", "new_string": "b"}, withhold="1.0")
    assert "integer count of cents" not in hit.stdout
    withheld = [r for r in g.rows("withheld") if r["domain"] == "acme"]
    assert [(r["crystal_id"], r["term"]) for r in withheld] == [("acme:cursor/typescript.md", "src/**/*.ts")]
    assert not [r for r in g.rows("delivered") if r["domain"] == "acme"]


def test_a_changed_rule_is_delivered_in_its_new_form(team):
    g, repo = team
    g.tool("Edit", {"file_path": str(repo / "src/cart.ts"), "old_string": "a", "new_string": "b"})
    rule = repo / ".cursor/rules/typescript.mdc"
    rule.write_text(rule.read_text().replace("never a float", "never a JavaScript number"))
    hit = g.tool("Edit", {"file_path": str(repo / "src/cart.ts"), "old_string": "a", "new_string": "b"}, session="s9")
    assert "never a JavaScript number" in hit.context
    (repo / ".cursor/rules/typescript.mdc").unlink()
    gone = g.tool("Edit", {"file_path": str(repo / "src/cart.ts"), "old_string": "a", "new_string": "b"}, session="s10")
    assert "integer count of cents" not in gone.stdout


@pytest.mark.slow
def test_recall_finds_every_section_and_upkeep_leaves_the_files_as_they_are(team):
    g, repo = team
    before = hashes(repo)
    queries = {
        "runInBand parallel runner": "claude-md/build-and-test",
        "two-space indentation imports sorted": "claude-md/code-style",
        "releases cut from main changelog": "claude-md/releases",
        "customer e-mail card token logger": "agents-md/security",
        "title format storefront pull request": "agents-md/pull-requests",
        "npm run dev setup": "agents-md/setup-commands",
        "reversible migration down up": "cursor/db-migrations",
        "release notes merged pull requests Added Changed Fixed": "skills/release-notes",
        "integer count of cents": "cursor/typescript",
    }
    for query, permalink in queries.items():
        res = cli(g, "search", query, "--mode", "text", "--json")
        assert res.returncode == 0, res.stderr
        found = [(r["domain"], r["address"]) for r in json.loads(res.stdout)["results"]]
        assert ("acme", f"geode://acme/{permalink}") in found[:3], (query, found)
    up = cli(g, "upkeep", "--json")
    assert up.returncode in (0, 1), up.stderr
    lint = cli(g, "lint", "--json")
    assert lint.returncode in (0, 1), lint.stderr
    assert json.loads(lint.stdout)["examined"]["team_rules"] == len(TEAM_FILES)
    assert hashes(repo) == before


def test_upkeep_files_nothing_against_a_team_rules_domain(team):
    from geode.agents.contract import Context, upkept_domains
    from geode.records.models import init_db

    g, _repo = team
    s = g.settings()
    team_sync.sync(s)
    assert "acme" in s.domains and [d for d, _r in upkept_domains(s)] == ["main"]
    assert [d for d, _r in Context(s).domains()] == ["main"]
    from geode.agents import filing
    from geode.agents.contract import Proposed, Report
    from geode.queue.changes import edit_change
    from geode.queue.proposals import ProposalDraft

    engine = init_db(s)
    try:
        root = Path(s.domains["acme"])
        text = (root / "cursor/typescript.md").read_text()
        change = edit_change(s, "acme", "cursor/typescript.md", text + "\nmore\n")
        draft = ProposalDraft("cleaner", "edit", "acme", "t", "r", [], [change], "run-x", "k1")
        report = Report("cleaner")
        report.proposed = [Proposed(draft)]
        filing.screen(Context(s, engine, "run-x"), "cleaner", report)
        assert report.proposed == [] and report.held_back == {"team-rules domain": 1}
    finally:
        engine.dispose()


def test_lint_names_each_rule_that_could_never_apply(tmp_path):
    repo = tmp_path / "bad"
    (repo / ".cursor/rules").mkdir(parents=True)
    (repo / ".claude/skills/empty").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / "src/a.py").write_text("x = 1\n")
    (repo / ".cursor/rules/go.mdc").write_text("---\ndescription: Go\nglobs: **/*.go\nalwaysApply: false\n---\nGo.\n")
    (repo / ".cursor/rules/quoted.mdc").write_text('---\nglobs: "src/**/*.py"\n---\nPython.\n')
    (repo / ".cursor/rules/lost.mdc").write_text("---\ndescription:\nglobs:\nalwaysApply: false\n---\nLost.\n")
    (repo / ".cursor/rules/yes.mdc").write_text("---\nalwaysApply: yes\n---\nAlways?\n")
    (repo / "CLAUDE.md").write_text("# X\n\nSee @docs/missing.md and @src/a.py.\n\n```\n@not/an/import.md\n```\n")
    (repo / ".claude/skills/empty/SKILL.md").write_text("---\nname: empty\n---\nDo things.\n")
    (repo / ".cursor/rules/latin1.mdc").write_bytes(b"---\nglobs: src/**/*.py\n---\nCaf\xe9.\n")
    g = Geode(tmp_path, config=f'[domains]\nmain = "store"\n\n[team_rules]\nbad = "{repo}"\n')
    g.crystal("a.md", "A note.", on="bash", match="make deploy")
    before = hashes(repo)
    res = cli(g, "lint", "--json")
    assert res.returncode == 1, res.stderr
    got = {
        (Path(p["path"]).relative_to(repo).as_posix(), p["line"], p["code"])
        for p in json.loads(res.stdout)["problems"]
        if p["domain"] == "bad"
    }
    assert got == {
        (".cursor/rules/go.mdc", 1, "team-glob-matches-nothing"),
        (".cursor/rules/quoted.mdc", 2, "team-glob-quoted"),
        (".cursor/rules/quoted.mdc", 1, "team-glob-matches-nothing"),
        (".cursor/rules/lost.mdc", 4, "team-rule-never-applies"),
        (".cursor/rules/yes.mdc", 2, "team-rule-bad-always"),
        (".cursor/rules/yes.mdc", 2, "team-rule-never-applies"),
        ("CLAUDE.md", 3, "team-import-missing"),
        (".claude/skills/empty/SKILL.md", 1, "team-skill-no-description"),
        (".cursor/rules/latin1.mdc", 4, "team-file-unreadable"),
    }
    # the unreadable file is named; every other rule is still read and delivered
    s = g.settings()
    assert {p for _d, p, _g in team_sync.attached(s, str(repo / "src/a.py"))} == set()
    assert "cursor/go.md" in {p for _d, p, _r, _g in team_sync.glob_rules(s)}
    assert hashes(repo) == before


def test_team_rules_name_cannot_be_a_domain_already(tmp_path):
    from geode.kernel.config import ConfigError, load_settings

    (tmp_path / "geode.toml").write_text('[domains]\nacme = "store"\n\n[team_rules]\nacme = "/tmp"\n')
    with pytest.raises(ConfigError, match=r"geode.toml:5: \[team_rules\] acme"):
        load_settings(home=tmp_path, env={})


# -- the stdlib readers against the libraries that read the same ----------------------------------
def test_globs_agree_with_gitignore_matching():
    pathspec = pytest.importorskip("pathspec")
    patterns = [
        "src/**/*.ts",
        "**/*.py",
        "*.md",
        "docs/*.md",
        "src/components/**",
        "tests/**/test_*.py",
        "**/migrations/*.sql",
        "a?c.txt",
        "src/[ab]*.ts",
        "build/",
        "/README.md",
        "**/node/**/x.js",
    ]
    paths = [
        "src/a.ts",
        "src/x/y/b.ts",
        "src/a.tsx",
        "lib/src/a.ts",
        "a.py",
        "pkg/m/b.py",
        "README.md",
        "docs/README.md",
        "docs/x/y.md",
        "src/components/Button.tsx",
        "src/components",
        "tests/test_a.py",
        "tests/unit/test_b.py",
        "tests/unit/b_test.py",
        "db/migrations/001.sql",
        "migrations/002.sql",
        "abc.txt",
        "x/abc.txt",
        "ac.txt",
        "src/alpha.ts",
        "src/beta.ts",
        "src/gamma.ts",
        "build/out.js",
        "a/build/out.js",
        "node/x.js",
        "a/node/b/x.js",
    ]
    checked = 0
    for pat in patterns:
        spec = pathspec.PathSpec.from_lines("gitignore", [pat])
        for path in paths:
            assert tr.glob_match(pat, path) == spec.match_file(path), (pat, path)
            checked += 1
    assert checked == len(patterns) * len(paths)
    assert tr.glob_match("src/**/*.{ts,tsx}", "src/a/b.tsx") and not tr.glob_match("src/*.{ts,tsx}", "src/a/b.ts")


def test_mdc_header_reads_as_header_format_does():
    from geode.kernel.header_format import cursor_fields

    rules = list((REPO_ROOT / "tests/fixtures/cursor_rules").glob("*.mdc")) + list(FIXTURE.glob(".cursor/rules/*.mdc"))
    assert len(rules) >= 8
    for p in rules:
        text = p.read_text(encoding="utf-8")
        mine = tr.mdc_header(text)
        theirs = cursor_fields(text)
        assert mine is not None and theirs is not None, p
        data = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in theirs[0].items()}
        assert ({k: v.lower() if k == "alwaysApply" else v for k, v in mine[0].items()}, mine[1], mine[2]) == (
            data,
            theirs[1],
            theirs[2],
        ), p


def test_sections_agree_with_markdown_it():
    from markdown_it import MarkdownIt

    corpus = [
        (FIXTURE / "CLAUDE.md").read_text(),
        (FIXTURE / "AGENTS.md").read_text(),
        "# A\n\n```bash\n# not a heading\n```\n\n## B ##\n   ### C\n    # code\n#no\n~~~\n# in tilde\n~~~\n# D #\n",
        "intro\n\n#\n\n## Two  \n````\n```\n# still code\n````\n###### six\n####### seven\n",
    ]
    md = MarkdownIt("commonmark")
    for text in corpus:
        tokens = md.parse(text)
        theirs = [
            (t.map[0] + 1, int(t.tag[1]), tokens[i + 1].content)
            for i, t in enumerate(tokens)
            if t.type == "heading_open" and t.markup.startswith("#")
        ]
        assert tr.headings(text) == theirs, text
        assert theirs


def test_skill_frontmatter_agrees_with_pyyaml():
    import yaml

    text = (FIXTURE / ".claude/skills/release-notes/SKILL.md").read_text()
    head = text.split("---\n")[1]
    data = yaml.safe_load(head)
    (skill,), troubles = tr.read_skill(".claude/skills/release-notes/SKILL.md", text)
    assert troubles == [] and skill.description == data["description"] and skill.title == f"skill {data['name']}"


def test_commands_and_imports_are_read_outside_code():
    text = (FIXTURE / "CLAUDE.md").read_text()
    assert tr.claude_imports(text) == [(3, "README.md"), (3, "docs/architecture.md")]
    sections = {s.slug: s for s in tr.read_sections("CLAUDE.md", tr.CLAUDE_MD, text)}
    assert sections["build-and-test"].commands == ("npm install", "npm run build", "npm test -- --runInBand")
    agents = {s.slug: s for s in tr.read_sections("AGENTS.md", tr.AGENTS_MD, (FIXTURE / "AGENTS.md").read_text())}
    assert agents["setup-commands"].commands == ("npm install", "npm run dev")
    assert agents["security"].commands == ()


def test_sections_that_name_commands_are_drafts_in_the_queue_never_crystals(team):
    from geode.agents.upkeep import run_upkeep
    from geode.queue.proposals import load
    from geode.queue.review import reject
    from geode.records.models import init_db

    g, repo = team
    before = hashes(repo)
    s = g.settings()
    engine = init_db(s)
    try:
        (report,) = run_upkeep(s, engine, agents=["gardener"])
        drafts = {p["paths"][0]: p for p in report.proposals}
        assert set(drafts) == {
            "team/acme/claude-md-build-and-test.md",
            "team/acme/claude-md-code-style.md",
            "team/acme/agents-md-setup-commands.md",
            "team/acme/agents-md-pull-requests.md",
        }, report.as_dict()
        assert not (g.store / "team").exists()  # proposed, never minted
        with engine.connect() as conn:
            _row, changes = load(conn, drafts["team/acme/claude-md-build-and-test.md"]["id"])
        text = changes[0]["after"]
        text = text.decode() if isinstance(text, bytes) else text
        assert '- "npm test -- --runInBand"' in text and "on: bash" in text
        assert 'team_source: "CLAUDE.md"\nteam_line: 5\n' in text and "TODO:" in text
        assert "parallel runner shares one test" not in text  # no sentence of the section is copied
        reject(s, engine, drafts["team/acme/claude-md-build-and-test.md"]["id"], "me")
        (again,) = run_upkeep(s, engine, agents=["gardener"])
        assert "team/acme/claude-md-build-and-test.md" not in {p["paths"][0] for p in again.proposals}
    finally:
        engine.dispose()
    assert hashes(repo) == before


def test_geode_deliver_attaches_a_rule_by_the_path_on_the_texts_first_line(team):
    g, repo = team
    res = cli(g, "deliver", "--on", "edit", "--text", f"{repo}/src/components/Button.tsx\nexport {{}}", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [(e["crystal_id"], e["term"]) for e in out["delivered"]] == [("acme:cursor/typescript.md", "src/**/*.tsx")]
    miss = cli(g, "deliver", "--on", "edit", "--text", f"{repo}/docs/architecture.md\nx", "--json")
    assert [e["crystal_id"] for e in json.loads(miss.stdout)["delivered"]] == []
