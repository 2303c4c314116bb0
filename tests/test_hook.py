"""The hook as the agents run it: the installer's exact command, through /bin/sh, JSON on stdin.

Each test builds a GEODE_HOME under tmp_path. ``GEODE_WITHHOLD_RATE=0`` everywhere except the
control-arm tests, so that a 10% withholding never makes a delivery test flaky.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from geode.delivery import ledger
from geode.delivery.pack import header
from geode.install.hooks import hook_command
from tests.helpers import Geode

PIPE = "A pipe into tail hides the exit code of the build: use set -o pipefail."

# Codex's hook output structs are deny_unknown_fields: a key outside these sets fails the hook
CODEX_TOP = {"continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason", "hookSpecificOutput"}
CODEX_SPECIFIC = {
    "PreToolUse": {
        "hookEventName",
        "permissionDecision",
        "permissionDecisionReason",
        "updatedInput",
        "additionalContext",
    },
    "SessionStart": {"hookEventName", "additionalContext"},
    "UserPromptSubmit": {"hookEventName", "additionalContext"},
}


@pytest.fixture()
def g(tmp_path) -> Geode:
    g = Geode(tmp_path)
    g.init_db()
    return g


def _pipe(g: Geode) -> None:
    g.crystal("pipe.md", PIPE, name="exit-code-through-a-pipe", match="| tail, |tail, | head")


def _quiet(res) -> None:
    assert res.rc == 0, res
    assert res.stdout == "", res


# -- PreToolUse, Claude ---------------------------------------------------------------------


def test_claude_bash_delivers_essence_and_the_term_that_selected_it(g):
    _pipe(g)
    res = g.bash("npm run build | tail -20")
    assert res.rc == 0 and res.errors == "", res
    out = res.json
    assert set(out) == {"hookSpecificOutput"}
    hso = out["hookSpecificOutput"]
    assert set(hso) == {"hookEventName", "additionalContext"}
    assert hso["hookEventName"] == "PreToolUse"
    assert PIPE in hso["additionalContext"]
    assert 'matched "| tail"' in hso["additionalContext"]
    assert "exit-code-through-a-pipe" in hso["additionalContext"]


def test_non_matching_command_is_silent(g):
    _pipe(g)
    res = g.bash("npm run build > build.log")
    _quiet(res)
    assert res.errors == ""
    assert g.rows("delivered") == []


def test_unknown_event_and_unbound_tool_are_silent(g):
    _pipe(g)
    _quiet(g.run("Notification", message="| tail"))
    _quiet(g.tool("WebFetch", {"url": "https://x/| tail", "prompt": "| tail"}))


# -- Codex: only keys Codex knows -------------------------------------------------------------


def _codex_keys_ok(out: dict, event: str) -> None:
    assert set(out) <= CODEX_TOP, set(out) - CODEX_TOP
    if "hookSpecificOutput" in out:
        assert set(out["hookSpecificOutput"]) <= CODEX_SPECIFIC[event]
        assert out["hookSpecificOutput"]["hookEventName"] == event


def test_codex_pretooluse_exact_keys(g):
    _pipe(g)
    res = g.bash("cargo build | tail -5", agent="codex")
    assert res.rc == 0 and res.errors == "", res
    out = res.json
    _codex_keys_ok(out, "PreToolUse")
    assert set(out) == {"hookSpecificOutput"}
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert PIPE in out["hookSpecificOutput"]["additionalContext"]


def test_codex_session_start_and_prompt_exact_keys(g):
    g.crystal("boot.md", "Boot essence for codex.", deliver="boot", on=None)
    g.crystal("inj.md", "Inject essence for codex.", deliver="inject", on=None, match="deploy")
    out = g.run("SessionStart", agent="codex", source="startup").json
    _codex_keys_ok(out, "SessionStart")
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert "Boot essence for codex." in out["hookSpecificOutput"]["additionalContext"]
    out = g.run("UserPromptSubmit", agent="codex", prompt="please deploy it").json
    _codex_keys_ok(out, "UserPromptSubmit")
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert "Inject essence for codex." in out["hookSpecificOutput"]["additionalContext"]


def test_codex_deny_once_exact_keys(g):
    g.config('[delivery]\nact_mode = "deny-once"\n')
    _pipe(g)
    out = g.bash("make | tail", agent="codex").json
    _codex_keys_ok(out, "PreToolUse")
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_codex_stop_exact_keys_and_session_end_row(g):
    for i in range(5):
        _quiet(g.bash(f"cargo test --package p{i}", agent="codex"))
    out = g.run("Stop", agent="codex", stop_hook_active=False, last_assistant_message="done").json
    assert set(out) == {"decision", "reason"} and out["decision"] == "block"
    assert len(g.rows("session_end")) == 1


# -- boot and inject ----------------------------------------------------------------------------


def test_session_start_cuts_each_boot_note_at_300_with_a_visible_mark(g):
    long_essence = "A" * 300 + "B" * 700
    p = g.crystal("boot/long.md", long_essence, deliver="boot", on=None, name="long-boot")
    g.crystal("boot/short.md", "Short boot note.", deliver="boot", on=None, name="short-boot")
    res = g.run("SessionStart", source="startup", model="claude-sonnet-4-6")
    assert res.rc == 0 and res.errors == "", res
    out = res.json
    assert set(out) == {"hookSpecificOutput"}
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "A" * 300 in ctx and "B" not in ctx
    assert "[cut at 300 of 1000 characters" in ctx and str(p) in ctx
    assert "Short boot note." in ctx and "Short boot note. …" not in ctx
    rows = {r["path"]: r for r in g.rows("delivered")}
    assert rows["boot/long.md"]["truncated"] == 1 and rows["boot/long.md"]["channel"] == "boot"
    assert rows["boot/short.md"]["truncated"] == 0


def test_user_prompt_submit_injects(g):
    g.crystal("deploy.md", "Deploys go through the release train.", deliver="inject", on=None, match="deploy")
    g.crystal("always.md", "Always-on prompt note.", deliver="inject", on=None)
    res = g.run("UserPromptSubmit", prompt="How do I Deploy this?", permission_mode="default")
    out = res.json
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "Deploys go through the release train." in ctx and "Always-on prompt note." in ctx
    ctx = g.run("UserPromptSubmit", prompt="fix the typo").context
    assert "Always-on prompt note." in ctx and "release train" not in ctx
    assert {r["channel"] for r in g.rows("delivered")} == {"inject"}


# -- actions ------------------------------------------------------------------------------------


def test_git_commit_fires_commit_crystals(g):
    g.crystal("commit.md", "Run the linters before committing.", on="commit", match="commit")
    g.crystal("bashonly.md", "Bash-bound note about commit.", on="bash", match="git commit")
    ctx = g.bash("git commit -m x").context
    assert "Run the linters before committing." in ctx
    assert "Bash-bound note about commit." in ctx  # a commit is also a bash action
    assert "this commit" in ctx
    _quiet(g.bash("echo commit"))  # mentions the word, is not a commit
    ctx = g.bash("GIT_AUTHOR_NAME=x git -C repo commit --amend").context
    assert "Run the linters before committing." in ctx
    rows = [r for r in g.rows("delivered") if r["path"] == "commit.md"]
    assert [r["action"] for r in rows] == ["commit", "commit"]


def test_write_fires_write_crystals_on_path_and_content(g, tmp_path):
    g.crystal("mig.md", "Migrations must be reversible.", on="write", match="migrations/")
    g.crystal("drop.md", "Never drop a table in a migration.", on="write", match="drop table")
    g.crystal("bashdrop.md", "Bash note on drop table.", on="bash", match="drop table")
    target = str(tmp_path / "project" / "db" / "migrations" / "001.sql")
    ctx = g.tool("Write", {"file_path": target, "content": "DROP TABLE users;"}).context
    assert "Migrations must be reversible." in ctx and "Never drop a table" in ctx
    assert "Bash note on drop table." not in ctx
    ctx = g.tool("Write", {"file_path": str(tmp_path / "x.sql"), "content": "drop table t"}).context
    assert "Never drop a table" in ctx and "reversible" not in ctx
    _quiet(g.tool("Edit", {"file_path": target, "old_string": "a", "new_string": "drop table"}))


def test_who_subagent_fires_only_inside_a_subagent(g):
    g.crystal("sub.md", "Subagents: report, do not fix.", match="pytest", who="subagent")
    g.crystal("main.md", "Main only note.", match="pytest", who="main")
    ctx = g.bash("pytest -q").context
    assert "Main only note." in ctx and "Subagents" not in ctx
    ctx = g.bash("pytest -q", agent_id="agent-7", agent_type="Explore").context
    assert "Subagents: report, do not fix." in ctx and "Main only note." not in ctx
    agents = {r["path"]: r["agent"] for r in g.rows("delivered")}
    assert agents == {"main.md": "main", "sub.md": "subagent:Explore"}


def test_same_file_name_in_two_folders_are_two_crystals(g):
    g.crystal("alpha/README.md", "Alpha deploy note.", name="readme", match="deploy")
    g.crystal("beta/README.md", "Beta deploy note.", name="readme", match="deploy")
    ctx = g.bash("./deploy.sh").context
    assert "Alpha deploy note." in ctx and "Beta deploy note." in ctx
    rows = g.rows("delivered")
    assert sorted(r["crystal_id"] for r in rows) == ["main:alpha/README.md", "main:beta/README.md"]


def test_backoff_is_per_crystal_not_per_file_name(g):
    g.config("[delivery]\nrepeat_backoff_s = 3600\n")
    g.crystal("alpha/README.md", "Alpha deploy note.", name="readme", match="alpha-deploy")
    g.crystal("beta/README.md", "Beta deploy note.", name="readme", match="beta-deploy")
    assert "Alpha deploy note." in g.bash("make alpha-deploy").context
    assert "Beta deploy note." in g.bash("make beta-deploy").context  # not suppressed by alpha's clock
    _quiet(g.bash("make alpha-deploy"))  # alpha's own clock does suppress it
    sup = g.rows("suppressed_backoff")
    assert [r["crystal_id"] for r in sup] == ["main:alpha/README.md"]
    assert [r["crystal_id"] for r in g.rows("delivered")] == ["main:alpha/README.md", "main:beta/README.md"]


def test_skipped_for_budget_go_first_on_the_next_matching_action(g):
    g.config("[delivery]\nbudget = 600\n")
    for name, sal in (("a", 0.9), ("b", 0.8), ("c", 0.1)):
        g.crystal(f"{name}.md", f"Note {name.upper()}: " + name * 160, name=f"note-{name}", match="make", salience=sal)
    ctx1 = g.bash("make all", session="s1").context
    assert "Note A:" in ctx1 and "Note B:" in ctx1 and "Note C:" not in ctx1
    assert len(ctx1) <= 600
    skips = g.rows("skipped_budget")
    assert len(skips) == 1 and skips[0]["crystal_id"] == ""  # one row per action holds the skipped set
    assert ledger.skipped_items("", "", skips[0]["detail"]) == [("main:c.md", "make")]
    ctx2 = g.bash("make test", session="s1").context
    assert "Note C:" in ctx2, "the crystal skipped for budget was not delivered first on the next action"
    assert 'note-c (matched "make" in this bash; carried over' in ctx2
    assert len(ctx2) <= 600
    # another session has nothing carried over: the plain order applies
    ctx3 = g.bash("make all", session="s2").context
    assert "Note A:" in ctx3 and "Note C:" not in ctx3


def test_deny_once_then_the_identical_call_passes(g):
    g.config('[delivery]\nact_mode = "deny-once"\n')
    _pipe(g)
    res = g.bash("npm run build | tail -20")
    hso = res.json["hookSpecificOutput"]
    assert set(hso) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    assert hso["hookEventName"] == "PreToolUse" and hso["permissionDecision"] == "deny"
    assert PIPE in hso["permissionDecisionReason"]
    _quiet(g.bash("npm run build | tail -20"))
    assert g.bash("npm run lint | tail -3").json["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert len(g.rows("denied_once")) == 2
    _quiet(g.bash("npm run build | tail -20", session="s1"))


# -- the ledger -----------------------------------------------------------------------------------


def test_ledger_rows_after_hook_calls(g):
    _pipe(g)
    big = "Z" * 9000
    g.crystal("big.md", big, name="big", match="deploy")
    ctx = g.bash("npm run build | tail -20", session="sess-42").context
    g.bash("./deploy.sh", session="sess-42")
    rows = g.rows("delivered", session="sess-42")
    assert len(rows) == 2
    pipe, bigrow = rows
    assert pipe["session"] == "sess-42"
    assert pipe["crystal_id"] == "main:pipe.md" and pipe["path"] == "pipe.md" and pipe["domain"] == "main"
    assert pipe["content_hash"] == hashlib.sha256(PIPE.encode()).hexdigest()
    assert pipe["action"] == "bash" and pipe["channel"] == "act" and pipe["agent"] == "main"
    assert pipe["term"] == "| tail"
    assert pipe["chars"] == len(ctx) - len(header("bash"))
    assert pipe["truncated"] == 0
    assert len(pipe["event_id"]) == 32 and pipe["ts"] > 0
    assert bigrow["crystal_id"] == "main:big.md" and bigrow["truncated"] == 1
    assert 0 < bigrow["chars"] <= 4000 and bigrow["term"] == "deploy"
    assert bigrow["content_hash"] == hashlib.sha256(big.encode()).hexdigest()


# -- the control arm ----------------------------------------------------------------------------


def _five(g: Geode) -> None:
    for i in range(5):
        g.crystal(f"c{i}.md", f"Control essence {i}.", match="terraform")


def test_withhold_rate_one_withholds_every_crystal(g):
    _five(g)
    g.crystal("boot.md", "Boot withheld.", deliver="boot", on=None)
    _quiet(g.bash("terraform apply", withhold="1"))
    _quiet(g.run("SessionStart", source="startup", withhold="1"))
    assert g.rows("delivered") == []
    withheld = g.rows("withheld")
    assert sorted(r["crystal_id"] for r in withheld) == ["main:boot.md"] + [f"main:c{i}.md" for i in range(5)]
    assert all(r["session"] == "s1" for r in withheld)


def test_withhold_rate_zero_withholds_none(g):
    _five(g)
    ctx = g.bash("terraform apply", withhold="0").context
    assert all(f"Control essence {i}." in ctx for i in range(5))
    assert g.rows("withheld") == []
    assert len(g.rows("delivered")) == 5


# -- fail open ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stdin",
    [
        "this is not json {",
        '{"hook_event_name": "PreToolUse", ',
        "[1, 2]",
        "",
        '{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": "| tail"}',
        '{"hook_event_name": "PreToolUse", "tool_name": 7, "tool_input": {"command": 5}}',
        "\x00\x01",
    ],
)
def test_garbage_stdin_fails_open(g, stdin):
    _pipe(g)
    _quiet(g.run_raw(stdin))


def _run_with_home(home, payload: dict, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = hook_command("claude", home=home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update({"GEODE_HOME": str(home), "GEODE_WITHHOLD_RATE": "0"}, **(extra_env or {}))
    return subprocess.run(
        ["/bin/sh", "-c", cmd], input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=10
    )


BASH_EVENT = {
    "hook_event_name": "PreToolUse",
    "session_id": "s",
    "cwd": "/tmp",
    "tool_name": "Bash",
    "tool_input": {"command": "npm run build | tail -20"},
}


def test_geode_home_that_is_a_file_fails_open(tmp_path):
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder")
    proc = _run_with_home(home, BASH_EVENT)
    assert (proc.returncode, proc.stdout) == (0, "")


def test_store_that_is_a_file_fails_open(tmp_path):
    g = Geode(tmp_path, store=False)
    (tmp_path / "store-file").write_text("not a folder")
    g.config(f'[domains]\nmain = "{tmp_path / "store-file"}"\n')
    _quiet(g.bash("npm run build | tail -20"))


def test_malformed_geode_toml_fails_open(g):
    _pipe(g)
    g.config("[delivery\nbudget = ")
    _quiet(g.bash("npm run build | tail -20"))


def test_corrupt_index_fails_open(g):
    _pipe(g)
    assert PIPE in g.bash("make | tail").context
    for p in (g.home / "index").glob("bindings-*.sqlite*"):
        p.write_bytes(b"garbage" * 100)
    res = g.bash("make | tail")
    assert res.rc == 0 and (res.stdout == "" or PIPE in res.context)


def test_a_named_pipe_in_the_store_does_not_hang_the_hook(g):
    _pipe(g)
    os.mkfifo(g.store / "pipe-fifo.md")
    try:
        res = g.bash("npm run build | tail -20", timeout=5)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            "the hook blocked on a FIFO named pipe-fifo.md in the store (index._load_file -> "
            "crystal.read_text opens it without checking it is a regular file)"
        ) from None
    assert res.rc == 0 and PIPE in res.context


def test_codex_apply_patch_adding_a_file_fires_write_crystals(g):
    g.crystal("mig.md", "Migrations must be reversible.", on="write", match="migrations/")
    g.crystal("edit.md", "Edited migrations need a new number.", on="edit", match="migrations/")
    add = "*** Begin Patch\n*** Add File: db/migrations/002.sql\n+CREATE TABLE t (id int);\n*** End Patch\n"
    out = g.tool("apply_patch", {"command": add}, agent="codex").json
    _codex_keys_ok(out, "PreToolUse")
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "Migrations must be reversible." in ctx and "new number" not in ctx
    upd = "*** Begin Patch\n*** Update File: db/migrations/001.sql\n@@\n-a\n+b\n*** End Patch\n"
    ctx = g.tool("apply_patch", {"command": upd}, agent="codex").context
    assert "Edited migrations need a new number." in ctx and "reversible" not in ctx


def test_session_end_is_recorded_and_silent(g):
    _quiet(g.run("SessionEnd", reason="prompt_input_exit"))
    rows = g.rows("session_end")
    assert len(rows) == 1 and rows[0]["session"] == "s1"
    assert json.loads(rows[0]["detail"]) == {"reason": "prompt_input_exit", "agent": "claude"}
