"""Flavours beyond CommonMark read as their tools read them, and a reading that is implausible
is a failure, not a report: the unknown-syntax fixture gets the single ``cannot-read`` (and
``geode doctor`` fails with it), while a store with many truly broken links of a form geode
reads well keeps them as findings. Each flavour fixture's hand count (broken found, nothing
else) is tests/test_flavours.py::test_findings_equal_the_hand_count over
tests/fixtures/flavours/<name>/EXPECTED.json."""

from __future__ import annotations

import pytest

from geode.agents.upkeep import run_agent
from geode.services.doctor_reading import reading_check
from tests.stores import GeodeEnv
from tests.test_flavours import flavour_store


def test_a_store_of_unknown_syntax_gets_one_cannot_read_failure(tmp_path):
    env = flavour_store("unknown", tmp_path)
    settings, engine, root = env
    report = run_agent(settings, engine, "r", "librarian")
    assert "unknown kind" in report.message and "confidence none" in report.message
    assert [f.kind for f in report.findings] == ["cannot-read"]
    msg = report.findings[0].message
    assert (
        "links of the form (word)" in msg
        and "24 of 24 uses (12 of 12 distinct targets)" in msg
        and "index.md:3 p0" in msg
    )
    assert report.proposals == []
    ok, examined, why = reading_check(settings)
    assert not ok and examined["constructs_unreadable"] == 1 and "links of the form (word)" in why
    ok2, _e, why2 = reading_check(settings, {"librarian": report})
    assert not ok2 and "24 of 24" in why2


def test_doctor_runs_the_reading_check(tmp_path):
    from geode.services.doctor import doctor_checks

    settings, engine, root = flavour_store("unknown", tmp_path)
    checks = {c["name"]: c for c in doctor_checks(settings, skip_model=True)}
    assert checks["reading"]["ok"] is False
    assert "cannot read links of the form (word)" in checks["reading"]["message"]


def test_many_truly_broken_links_of_a_well_read_form_stay_findings(tmp_path):
    """40 notes; 30 links to .md notes of which 12 are gone: judged by construct (most resolve),
    so the 12 are findings and nothing is called unreadable."""
    env = GeodeEnv(tmp_path)
    for i in range(40):
        env.write(f"n{i:02d}.md", f"# Note {i}\n\nNext: [next](n{(i + 1) % 40:02d}.md).\n")
    for i in range(12):
        env.write(f"m{i:02d}.md", f"# Old {i}\n\nSee [gone](gone{i:02d}.md).\n")
    settings, engine, root = env
    report = run_agent(settings, engine, "r", "librarian")
    kinds = [f.kind for f in report.findings if f.kind != "orphan"]
    assert kinds == ["broken-link"] * 12
    assert reading_check(settings)[0] is True


def test_a_form_commonmark_defines_is_never_called_unreadable(tmp_path):
    """Every .md link broken (a folder deleted, 15 distinct targets), the notes otherwise linked
    by wikilinks: a relative file path is read as CommonMark defines it, so these are 15 findings."""
    env = GeodeEnv(tmp_path)
    for i in range(15):
        env.write(f"n{i:02d}.md", f"# Note {i}\n\n[[n{(i + 1) % 15:02d}]] and [old](old/page{i:02d}.md).\n")
    settings, engine, root = env
    report = run_agent(settings, engine, "r", "librarian")
    assert sorted(f.kind for f in report.findings) == ["broken-link"] * 15
    assert reading_check(settings)[0] is True


def test_a_link_form_the_hugo_render_hook_rewrites_is_reported_as_such(tmp_path):
    settings, engine, root = flavour_store("hugo", tmp_path)
    (root / "layouts" / "_default" / "_markup").mkdir(parents=True)
    (root / "layouts" / "_default" / "_markup" / "render-link.html").write_text("{{ .Destination }}\n")
    report = run_agent(settings, engine, "r", "librarian")
    assert not [f for f in report.findings if f.target == "/docs/old-page/"]
    assert [s.target for s in report.skipped] == ["/docs/old-page/"]
    assert "render hook" in report.skipped[0].reason


def test_mkdocs_admonition_bodies_and_snippet_includes(tmp_path):
    """An admonition's indented body is markdown (its broken link found); a snippet include
    resolves from the base_path mkdocs.yml names, the project root included."""
    project = tmp_path / "site"
    (project / "docs").mkdir(parents=True)
    (project / "mkdocs.yml").write_text(
        "site_name: x\nmarkdown_extensions:\n  - admonition\n  - pymdownx.snippets:\n      base_path: ['.', 'docs/inc']\n"
    )
    (project / "CHANGELOG.md").write_text("# Changes\n")
    (project / "docs" / "inc").mkdir()
    (project / "docs" / "inc" / "abbr.md").write_text("*[HTML]: HyperText\n")
    (project / "docs" / "start.md").write_text(
        "# Home\n\n!!! note\n    See [the guide](guide.md) and [gone](gone.md).\n\n"
        '--8<-- "CHANGELOG.md"\n--8<-- "abbr.md"\n--8<-- "missing.md"\n'
    )
    (project / "docs" / "guide.md").write_text("# Guide\n\n[start](start.md)\n")
    env = GeodeEnv(tmp_path, root=project / "docs")
    settings, engine, root = env
    report = run_agent(settings, engine, "r", "librarian")
    got = sorted((f.kind, f.line, f.target) for f in report.findings if f.kind != "orphan")
    assert got == [("broken-link", 4, "gone.md"), ("missing-path", 8, "missing.md")]
    assert report.examined["snippets"] == 3
    assert report.proposals == []


def test_the_flavour_can_be_configured(tmp_path):
    settings, engine, root = flavour_store("folder_notes", tmp_path, '[upkeep]\nflavour = "logseq"\n')
    report = run_agent(settings, engine, "r", "librarian")
    assert "logseq (configured)" in report.message


NEW_FIXTURES = ["logseq", "foam", "hugo", "obsidian_publish", "folder_notes", "unknown"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_three_nights_approving_everything_on_the_new_flavours(name, tmp_path):
    """Every agent, every proposal approved, three nights: no note file added, removed or
    changed outside a link target, and the third night files nothing."""
    from geode.agents.upkeep import run_upkeep
    from geode.queue import apply, proposals
    from tests.test_no_harm import note_texts, prose

    settings, engine, root = flavour_store(name, tmp_path)
    before = note_texts(root)
    filed = []
    for night in ("n1", "n2", "n3"):
        reports = run_upkeep(settings, engine, night)
        filed.append(sum(len(r.proposals) for r in reports))
        for p in proposals.list_proposals(engine, status="pending"):
            res = apply.approve(settings, engine, p["id"], "person")
            assert res["ok"] or res["status"] == "conflict", res
    after = note_texts(root)
    assert sorted(after) == sorted(before)
    assert {p: prose(t) for p, t in after.items()} == {p: prose(t) for p, t in before.items()}
    assert filed[2] == 0, filed


def test_logseq_namespaces_in_both_file_spellings_are_the_pages_they_name(tmp_path):
    """``[[lib/http]]`` is pages/lib%2Fhttp.md (older graphs), ``[[lib/json]]`` pages/lib___json.md:
    both reached, so neither is an orphan; a dangling ((uuid)) is the one finding."""
    env = GeodeEnv(tmp_path)
    env.write("logseq/config.edn", "{}\n")
    env.write("pages/index.md", "- [[lib/http]] and [[lib/json]]\n- ((6449b7b2-aaaa-4a5b-9c3d-000000000000))\n")
    env.write("pages/lib%2Fhttp.md", "- HTTP client\n- back to [[index]]\n")
    env.write("pages/lib___json.md", "- JSON\n- back to [[index]]\n")
    settings, engine, root = env
    report = run_agent(settings, engine, "r", "librarian")
    assert "logseq (logseq/config.edn at the store; confidence high)" in report.message
    assert [(f.kind, f.path, f.line) for f in report.findings] == [("broken-block-ref", "pages/index.md", 2)]
