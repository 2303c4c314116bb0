"""One shell reading: ``match.command_words`` (what the guard, the hook's counts and the Gardener
split on) is ``split_shell``'s words, cut at control operators, and agrees with ``shlex``."""

from __future__ import annotations

import shlex

import pytest

from geode.delivery import guard
from geode.delivery.match import command_words, split_shell

SIMPLE = [
    "grep -rn 'exit code' /store/notes",
    'cat "my file.md"',
    "FOO=1 sudo grep -e x -- /store",
    "git -C repo commit -m 'a b c'",
    "ls -la ~/.geode",
    "find . -name '*.md'",
]


@pytest.mark.parametrize("cmd", SIMPLE)
def test_a_simple_command_reads_as_shlex_reads_it(cmd: str) -> None:
    assert command_words(cmd) == [shlex.split(cmd)]


@pytest.mark.parametrize(
    ("cmd", "want"),
    [
        ("grep -r x /s 2>&1 | head -5", [["grep", "-r", "x", "/s"], ["head", "-5"]]),
        ("cat < /s/x", [["cat", "/s/x"]]),  # a redirection's target is still read
        ("grep x > /s/out 2>/dev/null", [["grep", "x", "/s/out", "/dev/null"]]),
        ("echo `cat /s/x`", [["echo"], ["cat", "/s/x"]]),
        ("echo $(ls /s) && (cd /s; ls)", [["echo"], ["ls", "/s"], ["cd", "/s"], ["ls"]]),
        ("cat <<EOF > out.md\nls /s\nEOF\nwc x", [["cat", "out.md"], ["wc", "x"]]),  # a body is data
        ("grep -c x <<< 'ls /s'", [["grep", "-c", "x"]]),
        ("ls 'unclosed /s", [["ls", "unclosed /s"]]),  # lenient: a stray quote does not hide words
        ("# a comment\ngrep x /s # geode:lookup", [["grep", "x", "/s"]]),
    ],
)
def test_operators_redirections_and_data(cmd: str, want: list[list[str]]) -> None:
    assert command_words(cmd) == want


@pytest.mark.parametrize("cmd", [*SIMPLE, "a | b && c; d & e", "x 2>&1 | tail", "ssh h 'journalctl | grep -v x'"])
def test_the_words_are_split_shells_words(cmd: str) -> None:
    """Same tokenizer as the match terms: every word of the command reading is a word token of
    ``split_shell``, in order (only descriptor numbers and here-document words are left out)."""
    toks, _data, _open = split_shell(cmd, lenient=True)
    words = [t.text for t in toks if not t.op]
    flat = [w for seg in command_words(cmd) for w in seg]
    it = iter(words)
    assert flat and all(w in it for w in flat)


def test_the_guard_reads_what_the_old_splitter_missed(tmp_path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    roots = {"main": str(store)}
    assert guard.bash_lookup(f"echo `cat {store}/x.md`", roots, str(tmp_path)) == ("main", "cat")
    assert guard.bash_lookup(f"# look\ngrep -r x {store}", roots, str(tmp_path)) == ("main", "grep")
    assert guard.bash_lookup(f"cat <<EOF > notes.txt\nls {store}\nEOF", roots, str(tmp_path)) is None
    assert guard.bash_lookup(f"cat < {store}/x.md", roots, str(tmp_path)) == ("main", "cat")
