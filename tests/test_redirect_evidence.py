"""Redirects and Hugo ``aliases`` are evidence that this very document moved (issue 21): the
Librarian rewrites a link to the page a redirect or alias names, and says which one as a fact.

Fixtures in each tool's own documented syntax:

- mkdocs-redirects: ``plugins: - redirects: redirect_maps: {'old.md': 'new.md'}``, both sides
  relative to ``docs_dir``; an external URL is no move inside the store.
- Hugo: ``aliases`` in YAML front matter (server-relative ``/docs/old-install/``) and in TOML
  front matter (relative ``old-config``, resolved against the page's section).
- ``_redirects`` (Netlify, Cloudflare Pages): ``from to [status]`` with ``#`` comments; a
  splat, a placeholder and a 200 rewrite say nothing about one document and are left out.

And a redirect geode itself wrote (a ``_redirects`` file an approved proposal created) is no
evidence: the filing gate refuses the rewrite.
"""

from __future__ import annotations

from geode.agents.evidence_gate import GEODE_FINDING, GEODE_MADE
from geode.agents.upkeep import run_agent
from geode.links.redirects import store_redirects
from geode.queue import apply, proposals
from geode.queue.proposals import FileChange, ProposalDraft
from tests.stores import GeodeEnv

MKDOCS = {
    "mkdocs.yml": (
        "site_name: x\n"
        "markdown_extensions:\n  - pymdownx.emoji:\n      emoji_index: !!python/name:material.extensions.emoji.twemoji\n"
        "plugins:\n  - search\n  - redirects:\n      redirect_maps:\n"
        "        'setup/old-install.md': 'setup/install.md'\n"
        "        'gone.md': 'https://example.com/elsewhere/'\n"
    ),
    "docs/index.md": "# Home\n\nSee [install](setup/old-install.md).\n\nAnd [gone](gone.md).\n",
    "docs/setup/install.md": "# Install\n\nBack [home](../index.md).\n",
}
HUGO = {
    "hugo.toml": 'baseURL = "https://example.org/"\n',
    "content/_index.md": "---\ntitle: Home\n---\nSee [install](docs/old-install.md).\n\nAnd [config](docs/old-config.md).\n",
    "content/docs/install.md": "---\ntitle: Install\naliases:\n  - /docs/old-install/\n---\nSteps.\n",
    "content/docs/config.md": '+++\ntitle = "Config"\naliases = ["old-config"]\n+++\nKeys.\n',
}
NETLIFY = {
    "_redirects": (
        "# moved pages\n"
        "/guide/old-start   /guide/start   301\n"
        "/blog/*            /news/:splat   301\n"
        "/app/*             /index.html    200\n"
        "/team/:name        /people/:name\n"
    ),
    "index.md": "# Home\n\nSee [start](guide/old-start.md).\n\nAnd [post](blog/post.md).\n",
    "guide/start.md": "# Start\n\nBack [home](../index.md).\n",
    "news/post.md": "# Post\n\nBack [home](../index.md).\n",
}


def _night(tmp_path, files):
    settings, engine, root = GeodeEnv(tmp_path, root="site").files(files, "")
    report = run_agent(settings, engine, "n1", "librarian")
    rewrites = {}
    for p in report.proposals:
        got = proposals.get(engine, p["id"])
        rewrites[p["paths"][0]] = got["facts"]
    return report, rewrites, root


def _sugg(report) -> dict[str, str]:
    return {f.target: f.suggestion for f in report.findings if f.kind in ("broken-link", "signpost-stale")}


def test_mkdocs_redirect_maps_move_a_page_and_an_external_target_moves_nothing(tmp_path):
    report, rewrites, root = _night(tmp_path, MKDOCS)
    assert _sugg(report) == {"setup/old-install.md": "docs/setup/install.md", "gone.md": ""}
    [facts] = rewrites.values()
    [r] = [f for f in facts if f["kind"] == "redirect"]
    assert (r["path"], r["line"], r["provenance"]) == ("mkdocs.yml", 9, "person")
    assert r["value"] == {
        "from": "docs/setup/old-install.md",
        "to": "docs/setup/install.md",
        "syntax": "mkdocs-redirects",
    }
    assert (root / "docs/index.md").read_text() == MKDOCS["docs/index.md"]  # filed, not applied


def test_hugo_aliases_in_yaml_and_toml_front_matter_move_a_page(tmp_path):
    report, rewrites, _root = _night(tmp_path, HUGO)
    assert _sugg(report) == {
        "docs/old-install.md": "content/docs/install.md",
        "docs/old-config.md": "content/docs/config.md",
    }
    facts = rewrites["content/_index.md"]
    got = {(f["kind"], f["path"], f["line"]) for f in facts if f["kind"] in ("redirect", "frontmatter")}
    assert got == {
        ("redirect", "content/docs/install.md", 3),
        ("frontmatter", "content/docs/install.md", 3),
        ("redirect", "content/docs/config.md", 3),
        ("frontmatter", "content/docs/config.md", 3),
    }


def test_a_redirects_file_moves_one_page_and_splats_placeholders_and_rewrites_move_none(tmp_path):
    report, rewrites, root = _night(tmp_path, NETLIFY)
    assert _sugg(report) == {"guide/old-start.md": "guide/start.md", "blog/post.md": ""}
    [r] = [f for f in rewrites["index.md"] if f["kind"] == "redirect"]
    assert (r["path"], r["line"], r["value"]["syntax"]) == ("_redirects", 2, "_redirects")
    found = store_redirects(str(root), {"guide/start.md": 1, "news/post.md": 1, "index.md": 1}, "plain")
    assert {r.old for r in found.values()} == {
        "/guide/old-start",
        "guide/old-start.md",
        "guide/old-start/index.md",
        "guide/old-start/_index.md",
    }


def test_without_a_redirect_a_similar_name_is_no_evidence(tmp_path):
    files = {k: v for k, v in NETLIFY.items() if k != "_redirects"}
    report, rewrites, _root = _night(tmp_path, files)
    assert _sugg(report) == {"guide/old-start.md": "", "blog/post.md": ""}
    assert rewrites == {}


def test_a_redirect_geode_wrote_is_no_evidence(tmp_path):
    files = {k: v for k, v in NETLIFY.items() if k != "_redirects"}
    settings, engine, _root = GeodeEnv(tmp_path, root="site").files(files, "")
    rule = b"/guide/old-start /guide/start 301\n"
    draft = ProposalDraft(
        "gardener",
        "new_note",
        settings.default_domain,
        "t",
        "r",
        [{"finding": 1}],
        [FileChange("_redirects", None, rule)],
        "r0",
        "k",
    )
    pid = proposals.file_proposal(settings, engine, draft)
    assert apply.approve(settings, engine, pid, "person")["ok"]
    report = run_agent(settings, engine, "n1", "librarian")
    assert _sugg(report)["guide/old-start.md"] == "guide/start.md"  # read, and then refused
    assert report.proposals == [] and report.held_back == {GEODE_MADE: 1}
    [refused] = [f for f in report.findings if f.kind == GEODE_FINDING]
    assert f"redirect _redirects:1 was written by proposal #{pid}" in refused.message
