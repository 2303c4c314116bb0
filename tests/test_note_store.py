"""Note parsing (with exact line numbers) and a store walk that bad input never takes down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geode.delivery.binding import parse_binding
from geode.kernel.note import Link, Observation, parse_note
from geode.kernel.problems import Problem
from geode.kernel.store import load_store, read_note_file
from tests.helpers import REPO, crystal_text

NOTE = """\
---
name: exit-code-through-a-pipe
description: one line, what it is about
type: feedback
tags: [shell, ci]
salience: 0.8
crystal:
  deliver: act
  on: bash
  match: "| tail, |tail"
---
# Exit code through a pipe

<!-- crystal:essence -->
A pipe into tail hides the exit code of the build.
Use `set -o pipefail`.
<!-- /crystal:essence -->

## Where this came from
- [incident] the build went green while failing #ci #shell
- relates_to [[Another note]]
- part_of [[Shell traps|traps]]
See also [[Third note]] and [[Fourth#Setup|four]] and [a doc](../runbooks/x.md#setup).
- plain observation with [a link](rel/path.md#anchor)
```
- not an observation [[Not a link]]
```
Inline `[[code span]]` is not a link, nor is [web](https://example.com/x.md).
"""


def _note():
    return parse_note(NOTE, "runbooks/pipe.md")


def test_frontmatter_fields():
    n = _note()
    assert n.has_frontmatter
    assert n.frontmatter["name"] == "exit-code-through-a-pipe"
    assert n.frontmatter["type"] == "feedback"
    assert n.frontmatter["tags"] == ["shell", "ci"]
    assert n.frontmatter["salience"] == 0.8
    assert n.name == "exit-code-through-a-pipe"
    assert n.title == "Exit code through a pipe"
    assert n.crystal == {"deliver": "act", "on": "bash", "match": "| tail, |tail"}
    assert n.line_of("crystal") == 7 and n.line_of("crystal.match") == 10
    assert n.body_line == 12


def test_essence_is_exactly_the_text_between_markers():
    n = _note()
    assert n.essence == "A pipe into tail hides the exit code of the build.\nUse `set -o pipefail`."
    assert n.essence_line == 14
    assert n.essence_problems == []


def test_typed_relations():
    rel = _note().relations
    assert rel == [
        Link("Another note", 21, "relation", "relates_to"),
        Link("Shell traps", 22, "relation", "part_of", alias="traps"),
    ]


def test_prose_links_wiki_alias_anchor_and_markdown():
    links = [lk for lk in _note().links if lk.kind != "relation"]
    assert links == [
        Link("Third note", 23, "wiki"),
        Link("Fourth", 23, "wiki", alias="four", anchor="Setup"),
        Link("../runbooks/x.md", 23, "markdown", alias="a doc", anchor="setup"),
        Link("rel/path.md", 24, "markdown", alias="a link", anchor="anchor"),
    ]
    targets = {lk.target for lk in _note().links}
    assert "Not a link" not in targets  # inside a fence
    assert "code span" not in targets  # inside a code span
    assert not any("example.com" in t for t in targets)  # external


def test_observations_with_line_numbers():
    obs = _note().observations
    assert obs == [
        Observation(20, "the build went green while failing #ci #shell", "incident", ("ci", "shell")),
        Observation(24, "plain observation with [a link](rel/path.md#anchor)"),
    ]


def test_permalink_defaults_to_the_path_inside_the_store():
    assert _note().permalink == "runbooks/pipe"
    assert parse_note("---\npermalink: /custom/place/\n---\nbody\n", "a/b.md").permalink == "custom/place"
    plain = parse_note("just a body\n", "deep/er/note.markdown")
    assert plain.permalink == "deep/er/note"
    assert plain.name == "note" and not plain.has_frontmatter and plain.body_line == 1


def test_essence_problems_name_the_line():
    n = parse_note("---\nname: x\n---\nintro\n<!-- crystal:essence -->\nnever closed\n", "x.md")
    assert n.essence is None
    assert [(line, code) for line, code, _m in n.essence_problems] == [(5, "essence-unclosed")]


# -- the store walk -------------------------------------------------------------------------

GOOD = {
    "a.md": crystal_text("alpha essence", name="alpha", match='"alpha"'),
    "sub/b.md": crystal_text("beta essence", name="beta", match='"beta"'),
    "sub/deeper/c.markdown": "# plain note\nno frontmatter at all\n",
    "rules.mdc": "---\ndescription: cursor rules\nglobs: **/*.py\n---\nUse black.\n",
    "memory.md": "---\nname: crystal-memory\ncrystal:\n  deliver: act\n  on: bash\n  match: | tail, |tail, | head\n---\n"
    "<!-- crystal:essence -->\ntail hides the exit code\n<!-- /crystal:essence -->\n",
}


def _bad_store(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "store"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("---\nname: secret\n---\nnot ours\n")
    for rel, text in GOOD.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "bad-yaml.md").write_text("---\nname: x\ncrystal:\n  match: 'unclosed\n  on: bash\n---\nbody\n")
    (root / "binary.md").write_bytes(b"---\nname: bin\n---\n\x00\x01\x02\xff" * 10)
    (root / "latin1.md").write_bytes("---\nname: caf\n---\nline two\ncaf\xe9 au lait\n".encode("latin-1"))
    with open(root / "huge.md", "wb") as fh:  # 50 MB (sparse: its size is what counts)
        fh.truncate(50 * 1024 * 1024)
    os.symlink(outside / "secret.md", root / "escape.md")
    os.symlink(outside, root / "linked-dir")
    (root / ".git").mkdir()
    (root / ".git" / "ignored.md").write_text("not a note")
    (root / "readme.txt").write_text("not a note suffix")
    return root, outside


def test_bad_input_never_takes_the_store_down(tmp_path):
    root, outside = _bad_store(tmp_path)
    load = load_store(root, domain="main")
    assert {n.path for n in load.notes} == set(GOOD)
    problems = {p.path: p for p in load.problems}
    assert set(problems) >= {"bad-yaml.md", "binary.md", "latin1.md", "huge.md", "escape.md", "linked-dir"}
    expected = {
        "bad-yaml.md": (4, "skip-bad-frontmatter"),
        "binary.md": (0, "skip-binary"),
        "latin1.md": (5, "skip-not-utf8"),
        "huge.md": (0, "skip-too-large"),
        "escape.md": (0, "skip-symlink-outside"),
        "linked-dir": (0, "skip-symlink-dir"),
    }
    for path, (line, code) in expected.items():
        p = problems[path]
        assert (p.line, p.code) == (line, code), p
        assert str(p).startswith(f"{path}:{line}:"), str(p)  # names the file and the line
        assert p.domain == "main"
    assert "secret" not in {n.name for n in load.notes}
    assert "outside" in problems["escape.md"].message and "52,428,800" in problems["huge.md"].message
    assert load.files_seen == len(GOOD) + 5  # the five bad note files were examined, not missed


def test_unquoted_glob_loads_with_a_warning_to_quote_it(tmp_path):
    root, _ = _bad_store(tmp_path)
    note = {n.path: n for n in load_store(root).notes}["rules.mdc"]
    assert note.frontmatter["globs"] == "**/*.py"
    assert len(note.fm_warnings) == 1
    line, code, message = note.fm_warnings[0]
    assert line == 3 and "quote" in message.lower()


def test_crystal_memory_unquoted_pipe_match_loads_with_three_terms(tmp_path):
    root, _ = _bad_store(tmp_path)
    note = {n.path: n for n in load_store(root).notes}["memory.md"]
    b = parse_binding(note.crystal, note.fm_lines)
    assert b.terms == ("| tail", "|tail", "| head")
    assert b.on == ("bash",) and b.can_fire
    assert note.essence == "tail hides the exit code"


def test_missing_store_is_a_problem_not_an_exception(tmp_path):
    load = load_store(tmp_path / "nope")
    assert load.notes == [] and [p.code for p in load.problems] == ["no-store"]


_FIFO_SCRIPT = """
import sys
from geode.kernel.store import load_store
load = load_store(sys.argv[1])
print(sorted(n.path for n in load.notes))
print(sorted((p.path, p.code) for p in load.problems))
"""


def test_a_named_pipe_in_the_store_is_skipped_not_waited_on(tmp_path):
    """A FIFO called ``x.md`` must not hang the walk (opening it blocks until a writer comes)."""
    root = tmp_path / "store"
    root.mkdir()
    (root / "ok.md").write_text("fine\n")
    os.mkfifo(root / "pipe.md")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _FIFO_SCRIPT, str(root)], cwd=REPO, capture_output=True, text=True, timeout=5
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            "load_store blocked on a FIFO named pipe.md (read_text opens it without checking that it is a regular file)"
        ) from None
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "['ok.md']"
    assert "pipe.md" in proc.stdout.splitlines()[1]


# -- fuzz: nothing a file holds makes the reader raise --------------------------------------


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


_YAMLISH = st.lists(
    st.sampled_from(
        [
            "---\n",
            "---",
            "\n",
            "name: x\n",
            "crystal:\n",
            "  on: bash\n",
            "  match: ",
            "| tail, ",
            "'",
            '"',
            "[",
            "]",
            "{",
            "}",
            ":",
            "- ",
            "  ",
            "\t",
            "#",
            "*",
            "&",
            "!",
            "|",
            ">",
            "<!-- crystal:essence -->",
            "<!-- /crystal:essence -->",
            "[[",
            "]]",
            "(",
            ")",
            "\ufeff",
            "\r\n",
            "é",
            "\x00",
            "```\n",
            "a",
        ]
    ),
    max_size=60,
).map("".join)


def _check_file(root: Path, data: bytes) -> None:
    (root / "fuzz.md").write_bytes(data)
    result = read_note_file(root, "fuzz.md")
    assert isinstance(result, Problem) or result.path == "fuzz.md"
    if isinstance(result, Problem):
        assert result.path == "fuzz.md" and result.code.startswith("skip-")
    load = load_store(root)
    assert load.files_seen == 1 and len(load.notes) + len(load.problems) == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_fuzz_random_bytes_never_raise(fuzz_root, data):
    _check_file(fuzz_root, data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_YAMLISH, st.text(max_size=300)))
def test_fuzz_random_text_never_raises(fuzz_root, text):
    _check_file(fuzz_root, text.encode("utf-8", "surrogatepass"))
