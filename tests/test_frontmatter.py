"""The frontmatter reader: a YAML subset with line numbers and crystal-memory leniency."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geode.kernel.crystal import NoteError, parse_crystal_text
from geode.kernel.frontmatter import FrontmatterError, parse_frontmatter

FM = """\
name: exit-code-through-a-pipe
description: "one line: what it is about"
type: feedback
tags: [shell, "ci", 'build']
salience: 0.8
count: 3
stable: true
valid_to:
valid_from: 2026-06-01
crystal:
  deliver: act
  on: [bash, commit]
  match: "| tail, |tail"
  who: all
supersedes:
  - retry-cutoff-2025
  - old: note
    why: replaced
notes: |
  first line
  second line
folded: >-
  one
  two
"""


def test_values_and_types():
    data = parse_frontmatter(FM).data
    assert data["name"] == "exit-code-through-a-pipe"
    assert data["description"] == "one line: what it is about"
    assert data["tags"] == ["shell", "ci", "build"]
    assert data["salience"] == 0.8 and isinstance(data["salience"], float)
    assert data["count"] == 3 and isinstance(data["count"], int)
    assert data["stable"] is True
    assert data["valid_to"] is None
    assert data["valid_from"] == "2026-06-01"  # dates stay text
    assert data["crystal"] == {"deliver": "act", "on": ["bash", "commit"], "match": "| tail, |tail", "who": "all"}
    assert data["supersedes"] == ["retry-cutoff-2025", {"old": "note", "why": "replaced"}]
    assert data["notes"] == "first line\nsecond line\n"
    assert data["folded"] == "one two"


def test_key_lines_are_file_lines():
    # frontmatter text starts on file line 2 (line 1 is the opening ---)
    lines = parse_frontmatter(FM, first_line=2).lines
    assert lines["name"] == 2
    assert lines["tags"] == 5
    assert lines["crystal"] == 11
    assert lines["crystal.deliver"] == 12
    assert lines["crystal.match"] == 14
    assert lines["crystal.who"] == 15
    assert lines["supersedes[1].why"] == 19


def test_crystal_memory_match_with_leading_pipe_is_text_with_a_warning():
    fm = "crystal:\n  on: bash\n  match: | tail, |tail, | head\n"
    parsed = parse_frontmatter(fm, first_line=2)
    assert parsed.data["crystal"]["match"] == "| tail, |tail, | head"
    assert [(line, code) for line, code, _m in parsed.warnings] == [(4, "lenient-block-indicator")]


def test_real_block_scalar_still_reads_as_block():
    parsed = parse_frontmatter("text: |\n  a\n  b\nnext: 1\n")
    assert parsed.data == {"text": "a\nb\n", "next": 1}
    assert parsed.warnings == []


def test_unquoted_glob_reads_as_text_and_says_to_quote_it():
    parsed = parse_frontmatter("description: rules\nglobs: **/*.py\n", first_line=2)
    assert parsed.data["globs"] == "**/*.py"
    assert len(parsed.warnings) == 1
    line, code, message = parsed.warnings[0]
    assert line == 3 and code == "unquoted-special"
    assert "quote" in message.lower() and '"**/*.py"' in message


def test_duplicate_key_warns_and_last_wins():
    parsed = parse_frontmatter("a: 1\nb: 2\na: 3\n", first_line=2)
    assert parsed.data == {"a": 3, "b": 2}
    assert [(ln, c) for ln, c, _m in parsed.warnings] == [(4, "duplicate-key")]


def test_comments_and_blank_lines():
    parsed = parse_frontmatter("# top\nname: x # trailing\n\nurl: a#b\n")
    assert parsed.data == {"name": "x", "url": "a#b"}


@pytest.mark.parametrize(
    "text, line",
    [
        ("name: x\n\tbad: 1\n", 3),  # tab indentation on the second frontmatter line
        ("name: x\ndesc: 'never closed\n", 3),
        ("- a\n- b\n", 2),  # a list, not a mapping
        ("name: x\njust words\n", 3),
        ("a: [1, 2\nb: 3\n", 2),
        ('a: "x" trailing\n', 2),
    ],
)
def test_errors_carry_the_file_line(text, line):
    with pytest.raises(FrontmatterError) as info:
        parse_frontmatter(text, first_line=2)
    assert info.value.line == line
    assert f"line {line}" in str(info.value)


def test_note_error_names_file_and_line():
    text = "---\nname: x\ncrystal:\n  on: bash\n  match: 'open\n---\nbody\n"
    with pytest.raises(NoteError) as info:
        parse_crystal_text(text, "runbooks/x.md")
    assert info.value.path == "runbooks/x.md"
    assert info.value.line == 5
    assert str(info.value).startswith("runbooks/x.md:5:")


def test_unclosed_frontmatter_is_reported_on_line_one():
    with pytest.raises(NoteError) as info:
        parse_crystal_text("---\nname: x\nno closing fence\n", "a.md")
    assert info.value.line == 1 and info.value.code == "unclosed-frontmatter"


_ALPHABET = st.sampled_from(
    list("ab:-|>[]{}'\"#\n *&!,~@`%") + ["  ", "\n  ", "\n- ", "key: ", "\t", "\\", "match: ", "---"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_fuzz_only_frontmatter_errors_escape(text):
    try:
        parsed = parse_frontmatter(text)
    except FrontmatterError as exc:
        assert exc.line >= 2
        return
    assert isinstance(parsed.data, dict)
