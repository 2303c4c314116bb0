"""The lookup guard (hunting through the store by hand is denied, a marked lookup passes and is
counted) and the Stop hook (asks once for a crystal after real work that wrote none)."""

from __future__ import annotations

import pytest

from tests.helpers import Geode

DENY_KEYS = {"hookEventName", "permissionDecision", "permissionDecisionReason"}


@pytest.fixture()
def g(tmp_path) -> Geode:
    g = Geode(tmp_path)
    g.crystal("x.md", "An essence about pipes.", name="pipes", match='"| tail"')
    g.init_db()
    return g


def _denied(res) -> str:
    assert res.rc == 0 and res.errors == "", res
    hso = res.json["hookSpecificOutput"]
    assert set(hso) == DENY_KEYS
    assert hso["hookEventName"] == "PreToolUse" and hso["permissionDecision"] == "deny"
    assert "/geode/cli/command.py search" in hso["permissionDecisionReason"]  # works without the venv on PATH
    return hso["permissionDecisionReason"]


def _passes(res) -> None:
    assert res.rc == 0 and res.errors == "", res
    assert res.stdout == "", res


# -- the guard --------------------------------------------------------------------------------


def test_grep_in_the_store_is_denied_with_a_pointer_to_geode_search(g):
    reason = _denied(g.bash(f"grep -r foo {g.store}"))
    assert str(g.store) in reason and "geode:lookup" in reason
    rows = g.rows("blocked")
    assert len(rows) == 1 and rows[0]["domain"] == "main" and rows[0]["action"] == "grep"
    assert rows[0]["session"] == "s1"


@pytest.mark.parametrize(
    "command",
    [
        "cat {store}/x.md",
        "head -5 {store}/x.md",
        "cd /tmp && rg pipes {store}",
        "echo hi | grep foo {store}/x.md",
        "FOO=1 sudo find {store} -name '*.md'",
        "cat ../home/store/x.md",
        "git grep pipes -- {store}",
    ],
)
def test_lookup_commands_inside_the_store_are_denied(g, command):
    _denied(g.bash(command.format(store=g.store)))


def test_marked_lookup_passes_and_is_recorded(g):
    _passes(g.bash(f"cat {g.store}/x.md  # geode:lookup"))
    rows = g.rows("lookup_marked")
    assert len(rows) == 1 and rows[0]["domain"] == "main" and rows[0]["action"] == "cat"
    assert g.rows("blocked") == []


def test_read_grep_glob_tools_inside_the_store_are_denied(g):
    _denied(g.tool("Read", {"file_path": str(g.store / "x.md")}))
    _denied(g.tool("Grep", {"pattern": "pipes", "path": str(g.store)}))
    _denied(g.tool("Glob", {"pattern": "**/*.md", "path": str(g.store)}))
    _denied(g.tool("Glob", {"pattern": f"{g.store}/**/*.md"}))
    assert sorted(r["action"] for r in g.rows("blocked")) == ["Glob", "Glob", "Grep", "Read"]


def test_listing_from_inside_the_store_is_denied(g):
    _denied(g.bash("ls", cwd=str(g.store)))
    _denied(g.tool("Grep", {"pattern": "pipes"}, cwd=str(g.store)))


@pytest.mark.parametrize(
    "command",
    [
        "grep -r foo /usr/share/doc",
        "cat README.md",
        "ls",
        "find . -name '*.md'",
        "echo {store}",
        "python -c 'print(1)' > out.txt",
    ],
)
def test_commands_outside_the_store_pass(g, command):
    _passes(g.bash(command.format(store=g.store)))


def test_tools_outside_the_store_pass(g, tmp_path):
    _passes(g.tool("Read", {"file_path": str(tmp_path / "project" / "main.py")}))
    _passes(g.tool("Grep", {"pattern": "x", "path": str(tmp_path / "project")}))
    _passes(g.tool("Glob", {"pattern": "**/*.py"}))
    assert g.rows("blocked") == []


def test_writing_into_the_store_is_not_a_lookup(g):
    _passes(g.tool("Write", {"file_path": str(g.store / "new.md"), "content": "hello"}))
    assert g.rows("blocked") == []


def test_reading_the_full_note_geode_cut_is_allowed(g):
    big = g.crystal("big.md", "B" * 9000, name="big", match='"deploy"')
    ctx = g.bash("./deploy.sh").context
    assert str(big) in ctx and "geode cut this note" in ctx
    _passes(g.tool("Read", {"file_path": str(big)}))
    # following geode's own pointer is a follow-up of the delivery, not a lookup (issue 23)
    assert [r["action"] for r in g.rows("followed_up")] == ["Read"] and g.rows("lookup_marked") == []
    _denied(g.tool("Read", {"file_path": str(big)}, session="other-session"))


def test_guard_off_by_config(g):
    g.config("[delivery]\nblock_lookups = false\n")
    _passes(g.bash(f"grep -r foo {g.store}"))
    assert g.rows("blocked") == []


# -- Stop ----------------------------------------------------------------------------------------


def _work(g: Geode, n: int = 5, session: str = "s1") -> None:
    for i in range(n):
        _passes(g.bash(f"pytest tests/test_{i}.py", session=session))


def _stop(g: Geode, session: str = "s1", active: bool = False):
    return g.run("Stop", session=session, stop_hook_active=active, last_assistant_message="Done.")


def test_stop_blocks_once_with_a_template_after_real_work(g):
    _work(g)
    res = _stop(g)
    assert res.rc == 0 and res.errors == "", res
    out = res.json
    assert set(out) == {"decision", "reason"} and out["decision"] == "block"
    reason = out["reason"]
    for marker in (
        "name: <",
        "crystal:",
        "deliver: act",
        "on: bash",
        'match: "pytest"',
        "<!-- crystal:essence -->",
        "<!-- /crystal:essence -->",
        "## Where this came from",
        str(g.store),
    ):
        assert marker in reason, marker
    assert len(g.rows("stop_blocked")) == 1
    _passes(_stop(g))  # never twice in a session
    _work(g, 3)
    _passes(_stop(g))
    assert len(g.rows("stop_blocked")) == 1


def test_stop_never_blocks_when_stop_hook_active(g):
    _work(g)
    _passes(_stop(g, active=True))
    assert g.rows("stop_blocked") == []


def test_stop_does_not_block_below_five_actions(g):
    _work(g, 4)
    _passes(_stop(g))
    assert g.rows("stop_blocked") == []


def test_stop_does_not_block_when_the_session_wrote_into_the_store(g):
    _work(g)
    _passes(g.tool("Write", {"file_path": str(g.store / "lesson.md"), "content": "---\nname: lesson\n---\nx\n"}))
    (g.store / "lesson.md").write_text("---\nname: lesson\n---\nx\n")
    _passes(_stop(g))
    assert g.rows("stop_blocked") == []


def test_stop_does_not_block_when_a_crystal_appeared_during_the_session(g):
    _work(g)
    g.crystal("from-shell.md", "Written with a shell redirect.", match='"zz"')
    _passes(_stop(g))


def test_stop_is_per_session(g):
    _work(g, session="a")
    assert _stop(g, session="a").json["decision"] == "block"
    _work(g, 2, session="b")
    _passes(_stop(g, session="b"))
    _work(g, 3, session="b")
    assert _stop(g, session="b").json["decision"] == "block"
