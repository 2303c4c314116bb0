"""Failed, then fixed (issue 27): a session through the real hook command and the real ledger,
then the real ``geode drafts``, ``geode proposals approve``, ``geode lint`` and the hook again.

`npm test` fails, a file is edited, `npm test -- --runInBand` passes, the session stops: the
Stop output names one draft; ``geode drafts`` files it; the queue holds it with the observed
commands and exit codes; approving it writes a crystal lint passes, which fires on the failing
form and not on the fix. A session with no failure gets no draft; a rejected draft is not
proposed again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from geode.queue import proposals
from geode.queue import review as queue_review
from geode.records.models import init_db
from tests.helpers import Geode

ROOT = Path(__file__).resolve().parents[1]
ERROR = (
    "Exit code 1\n"
    "FAIL src/app.test.js\n"
    "  ● Test suite failed to run\n"
    "    jest-haste-map: Haste module naming collision: app\n"
    "      at jest.config.js:3:5\n"
)


def _geode(tmp_path) -> Geode:
    """A store with one note (the upkeep contract fails a run over an empty store) and a ledger."""
    g = Geode(tmp_path)
    g.write("notes/readme.md", "---\nname: readme\n---\nWhat this store is for.\n")
    g.init_db()
    return g


def _cli(g: Geode, *args: str) -> subprocess.CompletedProcess:
    env = g.env() | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=env, cwd=g.cwd, timeout=120
    )


def _shell(g: Geode, command: str, session: str, error: str | None = None, agent: str = "claude") -> None:
    """One Bash tool call as the agent makes it: PreToolUse, then PostToolUse (success) or, for
    Claude, PostToolUseFailure (a non-zero exit)."""
    pre = g.bash(command, session=session, agent=agent)
    assert pre.rc == 0 and not pre.errors, pre
    tool_input = {"command": command, "description": "run"}
    if error is None:
        post = g.run(
            "PostToolUse",
            session,
            agent,
            tool_name="Bash",
            tool_input=tool_input,
            tool_use_id="toolu_ok",
            tool_response={"stdout": "PASS src/app.test.js", "stderr": "", "interrupted": False, "isImage": False},
        )
    else:
        post = g.run(
            "PostToolUseFailure",
            session,
            agent,
            tool_name="Bash",
            tool_input=tool_input,
            tool_use_id="toolu_fail",
            error=error,
            is_interrupt=False,
        )
    assert post.rc == 0 and post.stdout == "" and not post.errors, post


def _edit(g: Geode, path: Path, session: str) -> None:
    tool_input = {"file_path": str(path), "old_string": "a", "new_string": "b", "replace_all": False}
    pre = g.tool("Edit", tool_input, session=session)
    assert pre.rc == 0 and not pre.errors, pre
    path.write_text("module.exports = { modulePathIgnorePatterns: ['<rootDir>/dist'] };\n")
    post = g.run(
        "PostToolUse",
        session,
        tool_name="Edit",
        tool_input=tool_input,
        tool_use_id="toolu_edit",
        tool_response={"filePath": str(path), "success": True},
    )
    assert post.rc == 0 and post.stdout == "" and not post.errors, post


def _failed_then_fixed(g: Geode, session: str = "s1") -> dict:
    config = g.cwd / "jest.config.js"
    config.write_text("module.exports = {};\n")
    _shell(g, "npm test", session, error=ERROR)
    _edit(g, config, session)
    _shell(g, "npm test -- --runInBand", session)
    stop = g.run("Stop", session, stop_hook_active=False, last_assistant_message="done")
    assert stop.rc == 0 and not stop.errors, stop
    return stop.json


def _file_drafts(g: Geode) -> list[dict]:
    r = _cli(g, "drafts", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["drafts"]


def test_failed_then_fixed_becomes_one_draft_that_fires_on_the_failing_form_only(tmp_path):
    g = _geode(tmp_path)
    out = _failed_then_fixed(g)
    runs = g.rows("shell_run", session="s1")
    assert [json.loads(r["detail"])["exit"] for r in runs] == [1, 0]
    assert [r["path"] for r in g.rows("file_touched", session="s1")] == [str(g.cwd / "jest.config.js")]
    assert not (Path(g.store) / "captured").exists(), "the hook wrote into the store"

    # the Stop hook's one interruption names the one draft and how to finish it
    assert out["decision"] == "block"
    reason = out["reason"]
    named = [line for line in reason.splitlines() if line.startswith("- draft ")]
    assert len(named) == 1, reason
    name = named[0].split()[2].rstrip(":")
    assert "`npm test` exited 1" in named[0] and "`npm test --runInBand` exited 0" in named[0]
    assert "geode drafts" in reason and "geode proposals approve" in reason

    # geode drafts files it; the queue holds it with the observed commands and exit codes
    drafts = _file_drafts(g)
    assert len(drafts) == 1, drafts
    assert drafts[0]["paths"] == [f"captured/{name}.md"]
    engine = init_db(g.settings())
    try:
        full = proposals.get(engine, drafts[0]["id"])
        assert full["status"] == "pending"
        diff = queue_review.diff(engine, drafts[0]["id"])
        text = "".join(
            line[1:] + "\n" for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")
        )
        cited = sorted(e["ledger_event"] for e in full["evidence"] if "ledger_event" in e)
        assert cited == sorted(r["id"] for r in runs)
    finally:
        engine.dispose()
    assert "- failed: `npm test` (exit 1)" in text
    assert "- then succeeded: `npm test -- --runInBand` (exit 0)" in text
    assert "- session: s1" in text and "jest.config.js" in text
    assert "FAIL src/app.test.js" in text  # the observed first lines, a starting point for the essence
    assert "on: bash" in text

    # a real approve writes the crystal; lint passes it
    r = _cli(g, "proposals", "approve", str(drafts[0]["id"]))
    assert r.returncode == 0, r.stdout + r.stderr
    written = Path(g.store) / "captured" / f"{name}.md"
    assert written.read_text() == text
    lint = _cli(g, "lint", "--json")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    mine = [p for p in json.loads(lint.stdout).get("problems", []) if name in json.dumps(p)]
    assert [p for p in mine if p.get("severity") in ("error", "warning")] == [], mine

    # the real hook delivers it on the failing form, and not on the fix
    hit = g.bash("npm test", session="s2")
    assert name in hit.context, hit
    miss = g.bash("npm test -- --runInBand", session="s3")
    assert miss.rc == 0 and not miss.errors and name not in miss.stdout, miss
    assert [r["path"] for r in g.rows("delivered", session="s3")] == []
    assert [r["path"] for r in g.rows("delivered", session="s2")] == [f"captured/{name}.md"]

    # once approved, the pair is not drafted again
    assert _file_drafts(g) == []


def test_a_session_with_no_failure_gets_no_draft(tmp_path):
    g = _geode(tmp_path)
    _shell(g, "npm test", "ok")
    _shell(g, "npm test -- --runInBand", "ok")
    stop = g.run("Stop", "ok", stop_hook_active=False)
    assert stop.rc == 0 and not stop.errors, stop
    assert len(g.rows("shell_run", session="ok")) == 2  # something was examined
    assert "draft" not in stop.stdout
    assert _file_drafts(g) == []


def test_the_same_command_passing_again_without_a_fix_is_no_pair(tmp_path):
    g = _geode(tmp_path)
    _shell(g, "npm test", "flaky", error=ERROR)
    _shell(g, "npm test", "flaky")
    assert [json.loads(r["detail"])["exit"] for r in g.rows("shell_run", session="flaky")] == [1, 0]
    assert _file_drafts(g) == []


def test_a_rejected_draft_is_not_proposed_again(tmp_path):
    g = _geode(tmp_path)
    _failed_then_fixed(g)
    drafts = _file_drafts(g)
    assert len(drafts) == 1
    r = _cli(g, "proposals", "reject", str(drafts[0]["id"]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert _file_drafts(g) == []
    assert not (Path(g.store) / "captured").exists()


def test_codex_post_tool_use_records_the_exit_status(tmp_path):
    g = _geode(tmp_path)
    for cmd, resp in (
        ("cargo test", {"exit_code": 101, "output": "error[E0425]: cannot find value `x`"}),
        ("cargo test --all-features", {"exit_code": 0, "output": "ok"}),
    ):
        pre = g.bash(cmd, session="cx", agent="codex")
        assert pre.rc == 0 and not pre.errors
        post = g.run(
            "PostToolUse",
            "cx",
            "codex",
            tool_name="Bash",
            tool_input={"command": cmd},
            tool_use_id="t",
            tool_response=resp,
        )
        assert post.rc == 0 and post.stdout == "" and not post.errors, post
    rows = [json.loads(r["detail"]) for r in g.rows("shell_run", session="cx")]
    assert [(d["word"], d["sub"], d["exit"]) for d in rows] == [("cargo", "test", 101), ("cargo", "test", 0)]
    assert rows[0]["error"] == ["error[E0425]: cannot find value `x`"]
    drafts = _file_drafts(g)
    assert len(drafts) == 1 and "cargo test" in drafts[0]["title"]


def test_the_nightly_gardener_files_the_draft_too(tmp_path):
    """The nightly upkeep's Gardener runs the capture rule first, whatever the ledger's age (a
    ledger of minutes is younger than its window, so its other rules file nothing)."""
    from geode.agents.upkeep import run_agent

    g = _geode(tmp_path)
    _failed_then_fixed(g)
    engine = init_db(g.settings())
    try:
        report = run_agent(g.settings(), engine, "night-capture", "gardener", trigger="nightly")
        drafts = [p for p in report.proposals if p["kind"] == "new_note"]
        assert report.examined["capture_pairs"] == 1, report.as_dict()
        assert len(drafts) == 1 and drafts[0]["paths"][0].startswith("captured/failed-npm-test-runinband-")
        again = run_agent(g.settings(), engine, "night-capture-2", "gardener", trigger="nightly")
        assert [p for p in again.proposals if p["kind"] == "new_note"] == []  # pending: not proposed twice
    finally:
        engine.dispose()


def _spool_kinds(g: Geode) -> list[str]:
    path = g.home / "spool" / "events.jsonl"
    return [json.loads(line)["kind"] for line in path.read_text().splitlines()] if path.exists() else []


def test_the_stop_hook_names_a_pair_whose_rows_are_still_in_the_spool(tmp_path):
    """The ledger's write lock is held by another process for the whole session (a long drain, a
    report), so every hook call spools its rows within its lock budget: the Stop hook must read
    them there, not only in the SQLite ledger. Once the lock is gone, ``geode drafts`` drains
    the spool and files the same draft, numbered by its ledger row."""
    import sqlite3

    g = _geode(tmp_path)
    holder = sqlite3.connect(g.home / "geode.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock; readers (WAL) still read
    try:
        out = _failed_then_fixed(g)
        assert g.rows("shell_run", session="s1") == []  # nothing reached the ledger
        assert _spool_kinds(g).count("shell_run") == 2 and "file_touched" in _spool_kinds(g)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert out.get("decision") == "block", out
    named = [line for line in out["reason"].splitlines() if line.startswith("- draft ")]
    assert len(named) == 1, out["reason"]
    assert named[0].startswith("- draft failed-npm-test-runinband: `npm test` exited 1"), named[0]
    assert "after edits to jest.config.js" in named[0] and "still in the spool" in named[0]

    drafts = _file_drafts(g)  # drains the spool first
    fail_id = g.rows("shell_run", session="s1")[0]["id"]
    assert [d["paths"] for d in drafts] == [[f"captured/failed-npm-test-runinband-{fail_id}.md"]]


def test_spool_rows_are_this_sessions_only_whole_lines_only_in_every_spool_file(tmp_path):
    """Other sessions' rows (one named ``s10`` beside ``s1``), another kind, a line still being
    written at the end, and a drain's ``*.draining`` file: only ``s1``'s whole capture rows."""
    from geode.delivery import capture, ledger

    g = _geode(tmp_path)
    s = g.settings()

    def ev(kind: str, session: str, path: str = "") -> dict:
        return ledger.new_event(kind, session=session, path=path, detail='{"word": "npm", "exit": 1}')

    mine = [ev("shell_run", "s1"), ev("file_touched", "s1", "a.js"), ev("shell_run", "s1")]
    spool = g.home / "spool"
    spool.mkdir(exist_ok=True)
    (spool / "events.123.abcd.draining").write_bytes(
        ledger.encode_line(mine[0]) + ledger.encode_line(ev("shell_run", "s10"))
    )
    torn = ledger.encode_line(ev("shell_run", "s1"))[:-20]
    (spool / "events.jsonl").write_bytes(
        ledger.encode_line(ev("delivered", "s1"))
        + ledger.encode_line(mine[1])
        + ledger.encode_line(ev("file_touched", "other", "b.js"))
        + ledger.encode_line(mine[2])
        + torn
    )
    got = capture.spool_rows(s, "s1")
    assert sorted(r[0] for r in got) == sorted(e["event_id"] for e in mine)
    assert {r[2] for r in got} == {"shell_run", "file_touched"}
