"""Each tool's own header format, and rewrites that need the same document (issue 21).

- The three-night test on stores in other tools' own syntax (``tests/foreign_stores.py``): all
  agents run, every proposal is approved, three nights in a row. After it: Cursor header lines
  byte for byte as they were, Hugo's TOML the same dict to ``tomllib``, Logseq's properties the
  same lines, no prose changed outside link targets, no include directive changed, no link
  that resolved broken, and the third night files nothing.
- Reading: a Hugo page's TOML and a Logseq page's properties give the note its title, aliases
  and tags; a Cursor rule's header is reported as Cursor's format, never as invalid YAML.
- The gate: a draft that quotes a rule's ``globs:`` (whichever agent made it) is not filed.
- Renames: git's ``R`` in a commit that also adds a sibling is no evidence; a plain move is.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from geode.agents import filing
from geode.agents.contract import Context, Finding, Proposed, Report
from geode.agents.upkeep import run_upkeep
from geode.kernel import header_format as hf
from geode.kernel.note import parse_note
from geode.links.refs import Ref
from geode.links.relink import git_renames, is_include_directive, rewrite_line
from geode.queue import apply, proposals
from geode.queue.proposals import FileChange, ProposalDraft
from tests.foreign_stores import CURSOR_RULES, MAKERS, make_cursor, make_git
from tests.stores import GeodeEnv
from tests.test_no_harm import note_texts, ok_links, prose

NOTE_SUFFIXES = (".md", ".mdc", ".markdown")


def _all_texts(root: Path) -> dict[str, str]:
    return note_texts(root)


def _headers(texts: dict[str, str]) -> dict[str, object]:
    """What each note's tool reads from its header: Cursor's raw lines, Hugo's TOML dict,
    Logseq's property lines (YAML headers: the raw block, geode's own to keep)."""
    out: dict[str, object] = {}
    for path, text in texts.items():
        kind = hf.header_kind(path, text)
        if kind == hf.CURSOR:
            out[path] = (kind, hf.header_text(text, "---"))
        elif kind == hf.TOML:
            out[path] = (kind, tomllib.loads(hf.header_text(text, "+++").strip("+\n")))
        elif kind == hf.LOGSEQ:
            out[path] = (kind, hf.property_lines(text))
        else:
            out[path] = (kind, None)
    return out


def _includes(texts: dict[str, str]) -> dict[str, Counter]:
    return {p: Counter(ln for ln in t.split("\n") if is_include_directive(ln)) for p, t in texts.items()}


def _approve_all(settings, engine) -> list[int]:
    applied = []
    for p in proposals.list_proposals(engine, status="pending"):
        res = apply.approve(settings, engine, p["id"], "person")
        assert res["ok"] or res["status"] == "conflict", res
        if res["ok"]:
            applied.append(p["id"])
    return applied


def _moves(engine, applied: list[int]) -> dict[str, str]:
    out = {}
    for pid in applied:
        full = proposals.get(engine, pid)
        gone = [c["path"] for c in full["changes"] if c["op"] == "delete"]
        made = [c["path"] for c in full["changes"] if c["op"] == "create"]
        if len(gone) == 1 and len(made) == 1:
            out[gone[0]] = made[0]
    return out


# -- the three nights --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_three_nights_of_approving_everything_keep_each_tools_headers(name, tmp_path):
    _project, root = MAKERS[name](tmp_path / "stores")
    env = GeodeEnv(tmp_path, root=root)
    settings, engine, root = env
    before = _all_texts(root)
    assert len(before) >= 5, f"{name}: the fixture holds {len(before)} notes"
    links_before = ok_links(settings)
    headers_before = _headers(before)
    includes_before = _includes(before)

    filed, moves = [], {}
    for night in (1, 2, 3):
        reports = run_upkeep(settings, engine, f"night-{night}")
        assert all(r.status in ("ok", "nothing-to-learn") for r in reports), [(r.agent, r.message) for r in reports]
        filed.append(sum(len(r.proposals) for r in reports))
        if night == 1:
            first = {r.agent: r for r in reports}
        moves.update(_moves(engine, _approve_all(settings, engine)))
        for r in reports:  # never "invalid YAML" about a Cursor rule
            bad = [f for f in r.findings if f.kind == "frontmatter-not-yaml" and f.path.endswith(".mdc")]
            assert bad == [], bad
    assert filed[2] == 0, f"{name}: the third night filed {filed}"

    after = _all_texts(root)
    assert all(moves.get(p, p) in after for p in before), "a note disappeared"
    headers_after = _headers(after)
    changed = [p for p in before if headers_after[moves.get(p, p)] != headers_before[p]]
    # a YAML header may change (geode's own, checked by the Corrector); a tool's own may not
    tool_changed = [p for p in changed if headers_before[p][0] in (hf.CURSOR, hf.TOML, hf.LOGSEQ)]
    assert tool_changed == [], f"{name}: headers changed meaning for their tool: {tool_changed}"
    if name == "cursor":
        for rel, text in CURSOR_RULES.items():
            assert hf.header_text(after[rel], "---") == hf.header_text(text, "---"), rel
    prose_changed = [p for p in before if prose(after[moves.get(p, p)]) != prose(before[p])]
    assert prose_changed == [], f"{name}: prose changed in {prose_changed}"
    assert _includes({p: after[moves.get(p, p)] for p in before}) == includes_before, "an include changed"
    links_after = ok_links(settings)
    lost = [
        (src, dest)
        for (dom, src, dest), n in links_before.items()
        if links_after[(dom, moves.get(src, src), moves.get(dest, dest))] < n
    ]
    assert lost == [], f"{name}: links that resolved and no longer do: {lost}"
    if name in ("hugo", "logseq"):  # the headers were read: a freshness duty met, never a key added
        fresh = "content/docs/install.md" if name == "hugo" else "pages/Project Alpha.md"
        assert any(
            sk.path == fresh and sk.target == "review_due" and "never edited" in sk.reason
            for sk in first["corrector"].skipped
        ), first["corrector"].skipped
    if name == "logseq":  # alias:: names the page to Logseq: [[PA]] and [[alpha]] resolve
        assert not [f for f in first["librarian"].findings if f.kind == "broken-link"], first["librarian"].findings
    if name == "git":  # the plain move is evidence: its links were rewritten and now resolve
        assert "](help/faq.md)" in after["index.md"], after["index.md"]
        assert "](tutorial.md)" in after["index.md"] and "tutorial-v" not in after["index.md"]
        assert "tutorial-v" not in after["guide.md"]
    if name == "mkdocs":
        assert after == before or all(after[p] == before[p] for p in ("changelog.md", "index.md")), (
            "the snippet page or the prose page was edited"
        )


# -- reading -----------------------------------------------------------------------------------
def test_hugo_toml_and_logseq_properties_give_title_aliases_and_tags():
    n = parse_note(
        "+++\ntitle = 'Install'\naliases = ['/old-install/']\ntags = ['setup']\n+++\n\n# Body\n\n[c](configure.md)\n",
        "content/docs/install.md",
    )
    assert n.title == "Install" and n.aliases == ["/old-install/"] and n.frontmatter["tags"] == ["setup"]
    assert n.body_line == 6 and "title =" not in n.body and n.links[0].line == 9
    n = parse_note("title:: Project Alpha\nalias:: alpha, PA\ntags:: project, [[active]]\n\n- x\n", "pages/a.md")
    assert n.title == "Project Alpha" and n.aliases == ["alpha", "PA"]
    assert n.frontmatter["tags"] == ["project", "active"]
    assert hf.header_kind("r.mdc", CURSOR_RULES["rust.mdc"]) == hf.CURSOR
    assert hf.header_kind("a.md", "---\na: 1\n---\n") == hf.YAML


def test_a_cursor_rule_header_is_reported_as_cursors_format_not_as_invalid_yaml(tmp_path):
    from geode.agents.upkeep import run_agent

    _project, rules = make_cursor(tmp_path / "stores")
    settings, engine, _root = GeodeEnv(tmp_path, root=rules)
    rep = run_agent(settings, engine, "r1", "librarian", "manual")
    assert [f for f in rep.findings if f.kind == "frontmatter-not-yaml"] == []
    assert rep.examined["header:cursor-mdc"] == len(CURSOR_RULES)
    assert "Cursor rule header" in rep.message


# -- the gate ----------------------------------------------------------------------------------
def test_a_draft_that_quotes_a_rules_globs_is_not_filed_whoever_made_it(tmp_path):
    _project, rules = make_cursor(tmp_path / "stores")
    settings, engine, root = GeodeEnv(tmp_path, root=rules)
    data = (root / "rust.mdc").read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    quoted = data.replace(b"globs: **/*.rs", b'globs: "**/*.rs"')
    body_only = data.replace(b"[testing](mdc:.cursor/rules/testing.mdc)", b"[tests](mdc:.cursor/rules/testing.mdc)")
    for after, harmful in ((quoted, True), (body_only, False)):
        domain = settings.domain_roots()[0][0]
        draft = ProposalDraft("anyone", "edit", domain, "t", "r", [], [FileChange("rust.mdc", sha, after)], "r", "k")
        report = Report(agent="anyone", proposed=[Proposed(draft, [Finding("x", "rust.mdc", 3, "")])])
        filing.screen(Context(settings, engine, "r"), "anyone", report)
        if harmful:
            assert report.proposed == [] and report.held_back == {"would-change-header": 1}
            [f] = [f for f in report.findings if f.kind == "proposal-would-change-header"]
            assert "Cursor rule header" in f.message and "rust.mdc" in f.message
        else:
            assert len(report.proposed) == 1, report.findings


def test_the_one_frontmatter_editor_on_a_toml_or_logseq_note_is_not_filed(tmp_path):
    """What ``set_key`` makes of a header that is not YAML (a YAML block put in front of it):
    the gate refuses it, whichever agent asks."""
    from geode.kernel.frontmatter_edit import set_key
    from tests.foreign_stores import make_hugo, make_logseq

    for make, rel in ((make_hugo, "content/docs/install.md"), (make_logseq, "pages/Project Alpha.md")):
        _p, store = make(tmp_path / make.__name__)
        settings, engine, root = GeodeEnv(tmp_path / make.__name__, root=store)
        data = (root / rel).read_bytes()
        after = set_key(data, "review_due", "2020-03-31", path=rel, after="last_verified")
        domain = settings.domain_roots()[0][0]
        draft = ProposalDraft(
            "anyone", "edit", domain, "t", "r", [], [FileChange(rel, hashlib.sha256(data).hexdigest(), after)], "r", "k"
        )
        report = Report(agent="anyone", proposed=[Proposed(draft, [Finding("stale", rel, 1, "")])])
        filing.screen(Context(settings, engine, "r"), "anyone", report)
        assert report.proposed == [] and report.held_back == {"would-change-header": 1}, rel
        assert "another format" in report.findings[0].message


def test_tool_header_change_says_what_each_tool_would_read_differently():
    toml = "+++\ntitle = 'A'\ntags = ['x']\n+++\nbody\n"
    assert hf.tool_header_change("a.md", toml, toml.replace("'A'", '"A"')) == ""  # the same dict
    assert "Hugo" in hf.tool_header_change("a.md", toml, toml.replace("'A'", "'B'"))
    assert "another format" in hf.tool_header_change("a.md", toml, "---\nreview_due: 2024-01-01\n---\n" + toml)
    lq = "title:: A\nalias:: b\n\n- x\n"
    assert "Logseq" in hf.tool_header_change("p.md", lq, lq.replace("alias:: b", "alias:: b, c"))
    assert hf.tool_header_change("p.md", lq, lq.replace("- x", "- y")) == ""
    rule = CURSOR_RULES["rust.mdc"]
    assert "byte for byte" in hf.tool_header_change("r.mdc", rule, rule.replace("**/*.rs", '"**/*.rs"'))
    assert hf.tool_header_change("a.md", "---\na: 1\n---\n", "---\na: '1'\n---\n") == ""  # YAML: geode's own check


# -- rewrites need the same document ----------------------------------------------------------
def test_git_renames_keep_a_plain_move_and_drop_a_rename_beside_a_new_sibling(tmp_path):
    project, docs = make_git(tmp_path)
    moves = git_renames(str(docs), str(project))
    assert moves.get("faq.md") == "help/faq.md"
    assert "tutorial.md" not in moves, moves


def test_includes_and_prose_mentions_are_never_rewritten():
    for line in ('--8<-- "CHANGELOG.md"', '{% include "CHANGELOG.md" %}', '{{< readfile file="CHANGELOG.md" >}}'):
        assert is_include_directive(line)
        assert rewrite_line(line, Ref(1, "path", "CHANGELOG.md", raw="CHANGELOG.md"), "changelog.md") is None
    prose_line = "The file CHANGELOG.md lists releases"
    assert rewrite_line(prose_line, Ref(1, "path", "CHANGELOG.md", raw="CHANGELOG.md"), "changelog.md") is None
    link = "See [log](CHANGELOG.md)."
    assert rewrite_line(link, Ref(1, "markdown", "CHANGELOG.md", raw="CHANGELOG.md"), "changelog.md") == (
        "See [log](changelog.md)."
    )
    assert not is_include_directive("See [log](CHANGELOG.md).")
    assert re.search("8<", '--8<-- "x.md"')
