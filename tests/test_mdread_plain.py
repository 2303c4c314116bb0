"""The plain path of the markdown reader (``geode.kernel.mdread.read_plain``) gives exactly the
``Reading`` the parser gives (``read_parsed``) on every body it accepts: the flavour fixtures,
every fixture note, the bench's generated store, and random bodies built from the plain pieces
and their near misses (which must fall through to the parser). Equal readings mean equal links,
headings and anchors, hence the agents' findings; the Librarian's findings on a generated store
are compared whole as well."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from geode.kernel import mdread
from geode.kernel.errors import GeodeError
from geode.kernel.mdread import read_markdown, read_parsed, read_plain
from geode.kernel.note import parse_note
from tests.upkeep_helpers import upkeep_bench

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"


def _notes(root: Path):
    for dirpath, _dirs, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith((".md", ".mdc", ".markdown")):
                continue
            p = Path(dirpath) / f
            try:
                yield p, parse_note(p.read_text(encoding="utf-8"), f)
            except (UnicodeDecodeError, GeodeError, ValueError, RecursionError):
                continue


def _compare(bodies) -> tuple[int, int]:
    """(bodies read, bodies the plain path took); every one it took equals the parser's reading."""
    seen = took = 0
    for where, body, first in bodies:
        seen += 1
        plain = read_plain(body, first)
        if plain is None:
            continue
        took += 1
        assert plain == read_parsed(body, first), f"{where}:\n{body}"
    return seen, took


def test_fixture_notes_read_the_same():
    seen, took = _compare((str(p), n.body, n.body_line) for p, n in _notes(FIXTURES))
    assert seen > 100
    assert took > 10  # some fixture notes are plain enough: the comparison is not empty


def test_flavour_fixtures_read_the_same():
    seen, took = _compare((str(p), n.body, n.body_line) for p, n in _notes(FIXTURES / "flavours"))
    assert seen > 20 and took > 0


def test_the_bench_store_reads_the_same_and_takes_the_plain_path(tmp_path):
    bench = upkeep_bench()
    bench.generate_store(tmp_path, 1200)  # crystals, broken links, cross-folder links, wrap-around
    seen, took = _compare((str(p), n.body, n.body_line) for p, n in _notes(tmp_path))
    assert seen == 1200
    assert took == seen  # the generated notes are all plain: the bench measures the plain path


# pieces of lines: plain ones, and near misses each of which some rule would read differently
_PLAIN = [
    "Plain words, numbers 42 and (parens) = ok; a/b/c.md: fine? @x {y} 'q' \"dq\" $5 100% #tag",
    "Next [[note-000001]] then [[Other Note|the alias]] and [[Deep#Part|shown]] [[#Local]]",
    "See [note 3](../area-001/note-000003.md#details) and [x](a.md) [y](#top) [z](sub/dir/)",
    "Mixed [[a]][[b|c]] [t](u.md)[v](w.md) end.",
    "Word [[ ]] and [[a b c]] and [[x|y z]]",
    "Text with a.md and docs/path and README.MD",
    "Wiki [[a]](b.md) after: the wikilink, then text",
]
_HEADINGS = ["# Title", "## Details", "### a/b.md heading", "###### Six", "# Title {x}", "## With (parens) and: colon"]
_COMMENTS = ["<!-- crystal:essence -->", "<!-- /crystal:essence -->", "<!---->", "<!-- a/b.md -->"]
_MISSES = [
    "####### seven",
    "#nospace",
    "# trailing #",
    "# Title {#id}",
    "#  two spaces",
    "- item [[a]]",
    "* star",
    "+ plus",
    "1. one",
    "2) two",
    "> quoted [[a]]",
    "    indented code",
    "\tTabbed",
    "```",
    "~~~",
    "===",
    "---",
    "***",
    "a | b",
    "|---|---|",
    "--- | ---",
    "Trailing space ",
    "Two trailing  ",
    " leading space",
    "Back\\slash",
    "Entity &amp; here",
    "Star *em* here",
    "Under_score",
    "Tick `code` here",
    "Tilde ~~x~~",
    "Bang ![[embed]]",
    "Caret ^block-1",
    "Foot [^1] ref",
    "[^1]: a footnote",
    "[ref]: target.md",
    "Use [ref] here",
    "Use [a][ref] here",
    "Wiki [[a|b|c]] three",
    "Link [a](b c.md) space",
    "Link [a](<b.md>) angle",
    "Link [a](http://example.com/x) url",
    'Link [a](b.md "title")',
    "Link [a](b(c).md) parens",
    "Link [a](javascript:alert) bad",
    'Html <a id="x">anchor</a>',
    '<a id="blk"></a>',
    "<div>",
    "<!-- open only",
    "<!-- a --> b -->",
    "Unicode caf\u00e9 text",
    "Carriage\r",
    "relates_to [[X]]",
    "[[Start]] line",
    "[link](start.md) line",
    "9 lives [[x]]",
]


def _random_body(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 9)):
        r = rng.random()
        if r < 0.2:
            lines.append("")
        elif r < 0.35:
            lines.append(rng.choice(_HEADINGS))
        elif r < 0.45:
            lines.append(rng.choice(_COMMENTS))
        elif r < 0.55:
            lines.append(rng.choice(_MISSES))
        else:
            lines.append(rng.choice(_PLAIN))
    return "\n".join(lines) + rng.choice(["\n", "", "\n\n"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bodies_read_the_same(seed):
    rng = random.Random(seed)
    bodies = [(f"seed {seed} body {k}", _random_body(rng), rng.randint(1, 9)) for k in range(1500)]
    seen, took = _compare(bodies)
    assert seen == 1500
    assert 100 < took < seen  # both paths taken


@pytest.mark.parametrize("miss", _MISSES)
def test_each_near_miss_takes_the_parser(miss):
    assert read_plain(f"# Title\n\nWords [[a]].\n{miss}\n") is None


def test_plain_and_parsed_agree_on_what_a_reader_needs():
    body = "# Top\n\nNext [[b|B]] and [c](../x/c.md#sec).\n<!-- note -->\n## Sub a/b.md\nText docs/x.md here\n"
    r = read_markdown(body, 3)
    assert r == read_parsed(body, 3)
    assert [(lk.line, lk.kind, lk.target, lk.anchor, lk.text) for lk in r.links] == [
        (5, "wiki", "b", "", "B"),
        (5, "markdown", "../x/c.md", "sec", "c"),
    ]
    assert [(h.line, h.level, h.text) for h in r.headings] == [(3, 1, "Top"), (7, 2, "Sub a/b.md")]
    assert [(s.line, s.text) for s in r.texts] == [(7, "Sub a/b.md"), (8, "Text docs/x.md here")]


def test_librarian_findings_are_the_same_either_way(tmp_path, monkeypatch):
    """The whole Librarian on a generated store: the plain path on, then off."""
    from geode.agents.upkeep import run_agent
    from tests.stores import GeodeEnv

    bench = upkeep_bench()
    root = tmp_path / "store"
    bench.generate_store(root, 1000)
    (root / "area-000" / "odd.md").write_text(
        "# Odd\n\n- relates_to [[note-000001]]\n- see *[[note-gone-x]]*\n", encoding="utf-8"
    )

    def run(run_id: str):
        settings, engine, _root = GeodeEnv(tmp_path / run_id, root=root)
        report = run_agent(settings, engine, run_id, "librarian")
        assert report.status == "ok", report.message
        return (
            sorted((f.kind, f.path, f.line, f.target, f.message, f.suggestion) for f in report.findings),
            report.examined,
        )

    with_plain = run("a")
    monkeypatch.setattr(mdread, "read_plain", lambda body, first_line=1: None)
    parsed_only = run("b")
    assert with_plain == parsed_only
    assert len(with_plain[0]) >= 10  # 1 in 100 links broken, and the odd note's
    assert with_plain[1]["wikilinks"] > 1000
