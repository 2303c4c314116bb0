"""The one markdown reader (geode.kernel.mdread): one test per construct the stores use, each
asserting what a CommonMark reader (and the store's tool) sees, with line numbers, and a
linear-time check on the input that made the old line patterns backtrack."""

from __future__ import annotations

import sys

from geode.kernel.mdread import read_markdown
from geode.kernel.note import parse_note
from geode.links.refs import note_anchors, slug, slug_pymd


def links(text: str, kinds: tuple[str, ...] = ()) -> list[tuple]:
    return [
        (lk.line, lk.kind, lk.target, lk.anchor) for lk in read_markdown(text).links if not kinds or lk.kind in kinds
    ]


def test_balanced_parentheses_in_a_destination():
    assert links("See [x](spec_(v2).md#a).\n") == [(1, "markdown", "spec_(v2).md", "a")]


def test_angle_bracket_destination_with_spaces_and_percent_escapes():
    got = read_markdown("[a](<my note.md>) and [b](my%20note.md#gr%C3%BC%C3%9Fe)\n").links
    assert [(lk.target, lk.anchor, lk.raw) for lk in got] == [
        ("my note.md", "", "my note.md"),
        ("my note.md", "grüße", "my%20note.md#gr%C3%BC%C3%9Fe"),
    ]


def test_images_are_embeds():
    (lk,) = read_markdown("![diagram](img/arch.png)\n").links
    assert (lk.kind, lk.target, lk.relation) == ("image", "img/arch.png", "embeds")


def test_reference_definition_and_uses():
    text = 'Use [it][ref] and [ref].\n\n[ref]: <docs/a b.md#top> "Title"\n\n[text][missing]\n'
    got = links(text)
    assert (3, "reference", "docs/a b.md", "top") in got
    assert (5, "refuse", "missing", "") in got
    assert len(got) == 2  # a use of a defined reference is the definition's link, not a second one


def test_a_footnote_definition_is_not_a_reference():
    text = "Text[^1].\n\n[^1]: **Release:** see [notes](notes.md).\n"
    r = read_markdown(text)
    assert [lk.kind for lk in r.links] == ["markdown"]  # the link inside the footnote, nothing else
    assert not r.definitions


def test_headings_atx_setext_quoted_listed_and_with_an_id():
    text = (
        "# One {#first}\n\nTwo\n---\n\n> ### Stack und Heap\n\n    # not a heading (indented code)\n\n- ## In a list\n"
    )
    got = [(h.line, h.level, h.text, h.attr_id) for h in read_markdown(text).headings]
    assert got == [(1, 1, "One", "first"), (3, 2, "Two", ""), (6, 3, "Stack und Heap", ""), (10, 2, "In a list", "")]


def test_wikilinks_alias_heading_block_and_embed():
    got = read_markdown("[[Note#Part|shown]] [[Note#^blk-1]] ![[pic.png]] [[#Local]]\n").links
    assert [(lk.kind, lk.target, lk.anchor, lk.text) for lk in got] == [
        ("wiki", "Note", "Part", "shown"),
        ("wiki", "Note", "^blk-1", ""),
        ("embed", "pic.png", "", ""),
        ("wiki", "", "Local", ""),
    ]


def test_escaped_pipe_inside_a_table():
    text = "| a | b |\n|---|---|\n| [[Sorting\\|Sort]] | x |\n"
    (lk,) = read_markdown(text).links
    assert (lk.line, lk.target, lk.text) == (3, "Sorting", "Sort")


def test_dendron_links_and_note_reference_ranges():
    text = "[[dendron://vault/lang.python]]\n![[note#summary,1:#*]]\n[[label|a.b.c]]\n"
    got = [(lk.line, lk.kind, lk.target, lk.anchor, lk.text) for lk in read_markdown(text).links]
    assert got == [
        (1, "wiki", "dendron://vault/lang.python", "", ""),
        (2, "embed", "note", "summary,1:#*", ""),
        (3, "wiki", "label", "", "a.b.c"),  # the resolver knows Dendron writes the alias first
    ]


def test_basic_memory_relations_observations_and_memory_urls():
    text = "- relates_to [[Coffee Origins]]\n- [tip] grind fresh #coffee\n\nSee [o](memory://coffee/origins).\n"
    note = parse_note(text, "n.md")
    assert [(lk.kind, lk.relation, lk.target) for lk in note.links] == [
        ("relation", "relates_to", "Coffee Origins"),
        ("markdown", "links_to", "memory://coffee/origins"),
    ]
    assert [(o.line, o.category, o.text, o.tags) for o in note.observations] == [
        (2, "tip", "grind fresh #coffee", ("coffee",))
    ]


def test_code_spans_are_mentions_and_code_blocks_and_comments_hold_no_links():
    text = (
        "Run `scripts/x.py --fast`.\n\n```\n[a](fenced.md)\n```\n\n    [b](indented.md)\n\n"
        "<!--\n[c](commented.md)\n-->\nInline <!-- [d](inline.md) --> end.\n"
    )
    r = read_markdown(text)
    assert r.links == []
    assert [(s.line, s.text) for s in r.code_spans] == [(1, "scripts/x.py --fast")]


def test_line_numbers_follow_soft_breaks_and_the_body_offset():
    r = read_markdown("first\nsecond [a](a.md)\n> quoted [b](b.md)\n", first_line=5)
    assert [(lk.line, lk.target) for lk in r.links] == [(6, "a.md"), (7, "b.md")]


def test_anchor_slugs_per_tool():
    # GitHub / mdBook keep letters of every script; Python-Markdown (mkdocs' default) drops non-ASCII
    assert slug("Über uns") == "über-uns" and slug_pymd("Über uns") == "uber-uns"
    assert slug("Café & Crème") == "café--crème" and slug_pymd("Café & Crème") == "cafe-creme"
    assert slug("概要") == "概要" and slug_pymd("概要") == ""
    note = parse_note("# FAQ\n\n# FAQ\n\n# 概要\n", "a.md")
    assert {"faq", "faq-1", "概要"} <= note_anchors(note, "github")
    assert note_anchors(note, "pymd") == {"faq", "faq_1", "_1"}
    assert "faq" in note_anchors(note, "obsidian")


def _steps(text: str) -> int:
    """The work of the whole path an agent takes over one note (parse, links, headings, prose
    paths and mentions, anchors, and the Corrector's masking of link targets), counted: every
    Python line run and every call into a builtin, as ``sys.settrace``/``sys.setprofile`` see
    them. A count does not depend on the machine's load, as a timing does (a timed version of
    this check failed a landing once); a scan inside one builtin (``str.find``) is one step."""
    from geode.corrector.edits import mask_link_targets
    from geode.links.refs import prose_refs

    count = 0

    def line(frame, event, arg):
        nonlocal count
        count += 1
        return line

    def builtin(frame, event, arg):
        nonlocal count
        if event == "c_call":
            count += 1

    tracer, profiler = sys.gettrace(), sys.getprofile()  # a coverage run's, put back after
    sys.settrace(line)
    sys.setprofile(builtin)
    try:
        note = parse_note(text, "long.md")
        assert note.links is not None and note.headings is not None
        prose_refs(note)
        note_anchors(note)
        mask_link_targets(text)
    finally:
        sys.setprofile(profiler)
        sys.settrace(tracer)
    return count


def test_one_long_line_is_read_in_linear_time():
    """``[a](`` repeated on one line (the note that took lint 11 s at 48 KB and hung upkeep at
    810 KB): four times the input takes about four times the steps (3.0 to 4.0 measured), never
    sixteen (quadratic); the threshold sits between the two. Small inputs do: a count is exact."""
    for unit in ("[a](", "[[a", "[a](b) "):
        n = 1_000 // len(unit)
        one, four = _steps(unit * n), _steps(unit * 4 * n)
        assert one > 10_000 and four < one * 6, (unit, one, four)
