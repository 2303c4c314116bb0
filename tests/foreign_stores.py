"""Stores written in other tools' own documented syntax, generated under a test's tmp_path (not
kept under tests/fixtures: test_no_harm globs that folder, and the git store needs real commits).

Each ``make_*`` returns ``(project folder, store root)``. What each tool reads is written as its
documentation shows it:

- Cursor rules (``.cursor/rules/*.mdc``): a ``---`` header of ``description:``, ``globs:`` (raw,
  unquoted: ``**/*.rs``, ``src/**/*.{ts,tsx}``, comma lists, empty) and ``alwaysApply:``.
- Hugo: ``hugo.toml``, ``content/`` with ``+++`` TOML front matter, ``_index.md`` section pages,
  ``aliases``, ``tags``, ``ref`` shortcodes.
- Logseq: ``logseq/config.edn``, ``pages/`` with ``title::``, ``alias::``, ``tags::`` page
  properties, block ``id::`` properties, ``journals/``.
- mkdocs: ``mkdocs.yml`` with pymdownx.snippets, ``docs/`` with a snippet include of a file at
  the repository root (``--8<-- "CHANGELOG.md"``) beside a docs page of a similar name, and
  prose that names files.
- A git repository (real ``git``) where one commit renames the main tutorial and adds a sibling
  version beside it, and another plainly moves a page (the one rename that is evidence).
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("utf-8"))


# -- Cursor ------------------------------------------------------------------------------------
CURSOR_RULES = {
    "rust.mdc": "---\ndescription: Rust conventions\nglobs: **/*.rs\nalwaysApply: false\n---\n"
    "# Rust\n\nUse `thiserror` for errors. Tests follow [testing](mdc:.cursor/rules/testing.mdc).\n",
    "react.mdc": "---\ndescription: React components\nglobs: src/**/*.{ts,tsx}\nalwaysApply: false\n---\n"
    "Components are functions. Styling: [css](mdc:.cursor/rules/Styles.mdc)\n",
    "typescript.mdc": "---\ndescription: TypeScript: strict mode, no any\nglobs: *.ts, *.tsx\nalwaysApply: false\n"
    "---\nEnable `strict`. See @tsconfig.json and [react](mdc:.cursor/rules/react.mdc).\n",
    "always.mdc": "---\ndescription:\nglobs:\nalwaysApply: true\n---\nAnswer briefly. Rust: [rust](mdc:.cursor/rules/rust.mdc)\n",
    "testing.mdc": "---\ndescription: How we test\nglobs: **/*.test.ts,**/*.spec.ts\nalwaysApply: false\n---\n"
    "# Testing\n\nOne assertion per behaviour. Fixtures live in `tests/fixtures/`.\n",
    "styles.mdc": "---\ndescription: CSS modules only\nglobs: **/*.css, **/*.module.css\nalwaysApply: false\n---\n"
    "No global selectors.\n",
    "python.mdc": "---\ndescription: Python style\nglobs: **/*.py\nalwaysApply: false\n---\n"
    "Type hints everywhere; `ruff` formats. Tests: [testing](mdc:.cursor/rules/testing.mdc)\n",
    "sql.mdc": "---\ndescription: SQL: migrations only\nglobs: migrations/**/*.sql\nalwaysApply: false\n---\n"
    "Never edit a table by hand.\n",
    "docker.mdc": "---\ndescription: Container images\nglobs: **/Dockerfile, docker/*\nalwaysApply: false\n---\n"
    "Pin base images by digest.\n",
    "rpc.mdc": "---\ndescription: RPC service boilerplate\nglobs:\nalwaysApply: false\n---\n"
    "Use our internal RPC pattern when defining services. See [python](mdc:.cursor/rules/python.mdc).\n",
    "go.mdc": "---\ndescription: [WIP] Go modules\nglobs: *.go, go.mod\nalwaysApply: false\n---\nGofmt everything.\n",
    "security.mdc": "---\ndescription: Secrets: never in code\nglobs: **/*\nalwaysApply: true\n---\n"
    "Read secrets from the environment.\n",
}


def make_cursor(base: Path) -> tuple[Path, Path]:
    project = base / "cursor_project"
    rules = project / ".cursor" / "rules"
    _write(rules, CURSOR_RULES)
    _write(project, {"tsconfig.json": "{}\n"})
    return project, rules


# -- Hugo --------------------------------------------------------------------------------------
HUGO = {
    "hugo.toml": "baseURL = 'https://example.org/'\nlanguageCode = 'en-us'\ntitle = 'Example docs'\n",
    "content/_index.md": "+++\ntitle = 'Home'\n+++\n\nWelcome. Start with [installing](docs/install.md).\n",
    "content/docs/_index.md": "+++\ntitle = 'Docs'\nweight = 1\n+++\n\n- [Install](install.md)\n- [Configure](configure.md)\n",
    "content/docs/install.md": "+++\ntitle = 'Install'\ndate = 2020-01-01T08:00:00Z\ndraft = false\n"
    "aliases = ['/old-install/', '/setup/']\ntags = ['setup', 'start']\nlast_verified = 2020-01-01\n"
    "[params]\n  author = 'Ann'\n+++\n\n# Install\n\nDownload the release, then [configure](configure.md).\n"
    "The file hugo.toml holds the site settings.\n",
    "content/docs/configure.md": "+++\ntitle = 'Configure: every option'\nweight = 2\n"
    'categories = ["guides"]\nlast_verified = 2021-06-01\n+++\n\n# Configure\n\nBack to [install](install.md).\n'
    'See also {{< ref "install.md" >}}.\n',
    "content/blog/first.md": "+++\ntitle = \"First post\"\ndate = '2023-02-01'\ntags = ['news']\n+++\n\n"
    "Read the [docs](../docs/_index.md).\n",
}


def make_hugo(base: Path) -> tuple[Path, Path]:
    site = base / "hugo_site"
    _write(site, HUGO)
    return site, site


# -- Logseq ------------------------------------------------------------------------------------
LOGSEQ = {
    "logseq/config.edn": '{:meta/version 1\n :preferred-format "Markdown"\n :journal/page-title-format "MMM do, yyyy"}\n',
    "pages/Project Alpha.md": "title:: Project Alpha\nalias:: alpha, PA\ntags:: project, active\n"
    "last_verified:: 2020-01-01\n\n- Kickoff with [[Bob]]\n  id:: 65a1c2d3-0000-4000-8000-000000000001\n"
    "- Plan lives in [[Roadmap]]\n",
    "pages/Bob.md": "title:: Bob\ntags:: person\n\n- Works on [[Project Alpha]]\n- See ((65a1c2d3-0000-4000-8000-000000000001))\n",
    "pages/Roadmap.md": "alias:: plan\n\n- Q1: ship [[alpha]]\n- Q2: see [[Bob]]\n",
    "pages/tools___git.md": "title:: tools/git\n\n- Branch per feature, see [[Roadmap]]\n",
    "journals/2024_01_15.md": "- Met [[Bob]] about [[PA]]\n- DONE read [[tools/git]]\n",
}


def make_logseq(base: Path) -> tuple[Path, Path]:
    graph = base / "logseq_graph"
    _write(graph, LOGSEQ)
    return graph, graph


# -- mkdocs ------------------------------------------------------------------------------------
MKDOCS = {
    "mkdocs.yml": "site_name: Example\nmarkdown_extensions:\n  - pymdownx.snippets:\n      base_path: ['.']\n",
    "CHANGELOG.md": "# Changelog\n\n## 1.0\n\n- First release.\n",
    "docs/index.md": "# Example\n\nSee the [setup guide](setup.md). The file CHANGELOG.md lists releases;\n"
    "docs/setup.md says how to install.\n",
    "docs/changelog.md": '# Changelog\n\n--8<-- "CHANGELOG.md"\n',
    "docs/setup.md": "# Setup\n\nInstall it. Edit mkdocs.yml and docs/index.md to change the site; release\n"
    "notes are in docs/changes.md (not written yet).\n\n"
    '--8<-- "docs/snippets/Note.md"\n',
    "docs/about.md": "# About\n\nThis site is built from docs/ with mkdocs; the changelog page includes\n"
    "CHANGELOG.md from the repository root. Questions go to [setup](setup.md#setup).\n",
    "docs/snippets/note.md": "!!! note\n    Snippets are included, not linked.\n",
}


def make_mkdocs(base: Path) -> tuple[Path, Path]:
    project = base / "mkdocs_site"
    _write(project, MKDOCS)
    return project, project / "docs"


# -- git ---------------------------------------------------------------------------------------
TUTORIAL = "# Tutorial\n\n" + "".join(f"Step {i}: do the thing number {i} carefully.\n" for i in range(1, 30))


def _git(cwd: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


def make_git(base: Path) -> tuple[Path, Path]:
    """``docs/tutorial.md`` renamed to ``docs/tutorial-v1.md`` in the commit that adds
    ``docs/tutorial-v2.md`` (a sibling version: no evidence which one ``tutorial.md`` meant); in
    its own commit ``docs/faq.md`` moved to ``docs/help/faq.md`` (evidence: the links follow)."""
    project = base / "git_project"
    docs = project / "docs"
    _write(
        docs,
        {
            "index.md": "# Docs\n\n- [Tutorial](tutorial.md)\n- [FAQ](faq.md)\n- [Guide](guide.md)\n",
            "guide.md": "# Guide\n\nBefore this, read the [tutorial](tutorial.md#step-1). Questions: [faq](faq.md).\n",
            "tutorial.md": TUTORIAL,
            "faq.md": "# FAQ\n\nAsk in the forum.\n",
        },
    )
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "docs")
    _git(project, "mv", "docs/tutorial.md", "docs/tutorial-v1.md")
    (docs / "tutorial-v2.md").write_text(TUTORIAL.replace("carefully", "quickly"), encoding="utf-8")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "tutorial: keep v1, add v2")
    (docs / "help").mkdir()
    _git(project, "mv", "docs/faq.md", "docs/help/faq.md")
    _git(project, "commit", "-q", "-m", "faq under help/")
    return project, docs


MAKERS = {
    "cursor": make_cursor,
    "hugo": make_hugo,
    "logseq": make_logseq,
    "mkdocs": make_mkdocs,
    "git": make_git,
}
