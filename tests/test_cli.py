"""The command line end to end, as a person runs it: real processes, a real GEODE_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.stores import NO_BACKGROUND_BUILD

ROOT = Path(__file__).resolve().parent.parent
STARTER = sorted(p.name for p in (ROOT / "geode" / "delivery" / "starter").glob("*.md"))


def geode(home: Path, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT)})
    e.update(env or {})
    r = subprocess.run([sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=e, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"geode {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def test_starter_set_is_not_empty():
    assert len(STARTER) >= 8


@pytest.mark.slow
def test_run_creates_store_and_shows_a_delivery(tmp_path):
    home = tmp_path / "home"
    r = geode(home, "run")
    assert sorted(p.name for p in (home / "store").glob("*.md")) == STARTER
    assert "exit-code-through-a-pipe" in r.stdout
    assert 'matched "| tail"' in r.stdout
    assert f"examined {len(STARTER)} notes" in r.stdout
    assert "crystals registered" in r.stdout
    # a second run keeps the store as it is (nothing overwritten, nothing added)
    (home / "store" / "exit-code-through-a-pipe.md").write_text(
        (home / "store" / "exit-code-through-a-pipe.md").read_text().replace("LAST command", "LAST command (edited)")
    )
    r2 = geode(home, "run")
    assert "(edited)" in r2.stdout


@pytest.mark.slow
def test_init_writes_control_plan_before_data(tmp_path):
    home = tmp_path / "h"
    geode(home, "init")
    cfg = (home / "geode.toml").read_text()
    for key in ("withhold_rate = 0.10", "stop_units = 100", "stop_date = ", "salt = "):
        assert key in cfg
    import sqlite3

    with sqlite3.connect(home / "geode.db") as c:
        rows = c.execute("SELECT rate, stop_units, stop_date, salt FROM control_plan").fetchall()
    assert len(rows) == 1 and rows[0][0] == pytest.approx(0.10) and rows[0][1] == 100 and rows[0][3]


@pytest.mark.slow
def test_deliver_json_shape_and_ledger_rows(tmp_path):
    home = tmp_path / "h"
    geode(home, "init")
    env = {"GEODE_WITHHOLD_RATE": "0"}
    r = geode(
        home, "deliver", "--on", "bash", "--text", "git add -A && git commit -m x", "--session", "s1", "--json", env=env
    )
    d = json.loads(r.stdout)
    assert set(d) >= {"delivered", "withheld", "skipped", "text"}
    names = sorted(e["name"] for e in d["delivered"])
    assert names == ["git-add-all-sweeps", "review-the-staged-diff"]  # bash + commit
    for e in d["delivered"]:
        assert set(e) >= {"name", "path", "term", "chars", "truncated"}
        assert e["chars"] > 0 and e["truncated"] is False
    assert len(d["text"]) == sum(e["chars"] for e in d["delivered"]) + d["text"].index("\n") + 1
    s = json.loads(geode(home, "stats", "--json").stdout)
    assert s["deliveries"] == 2


@pytest.mark.slow
def test_withhold_rate_one_withholds_everything(tmp_path):
    home = tmp_path / "h"
    geode(home, "init")
    r = geode(
        home,
        "deliver",
        "--on",
        "bash",
        "--text",
        "make | tail -5",
        "--session",
        "s9",
        "--json",
        env={"GEODE_WITHHOLD_RATE": "1"},
    )
    d = json.loads(r.stdout)
    assert d["delivered"] == [] and [e["name"] for e in d["withheld"]] == ["exit-code-through-a-pipe"]
    st = json.loads(geode(home, "study", "--json").stdout)
    assert st["arms"]["withheld"]["units"] == 1


@pytest.mark.slow
def test_deliver_rejects_unknown_action(tmp_path):
    home = tmp_path / "h"
    geode(home, "init")
    r = geode(home, "deliver", "--on", "bsah", "--text", "x", check=False)
    assert r.returncode == 2 and "unknown action 'bsah'" in r.stderr


def test_lint_reports_file_line_code_and_exit_status(tmp_path):
    home = tmp_path / "h"
    store = tmp_path / "store"
    store.mkdir()
    (store / "ok.md").write_text((ROOT / "geode" / "delivery" / "starter" / "pkill-broad-pattern.md").read_text())
    (store / "typo.md").write_text(
        '---\nname: typo\ncrystal:\n  deliver: act\n  on: bsah\n  match: "| tail"\n  who: all\n---\n'
        "<!-- crystal:essence -->\nx\n<!-- /crystal:essence -->\n\n## Where this came from\ntest\n"
    )
    (store / "nomark.md").write_text("---\nname: nomark\ncrystal:\n  on: bash\n  match: grep\n---\nbody\n")
    r = geode(home, "lint", "--store", str(store), "--json", check=False)
    assert r.returncode == 1
    d = json.loads(r.stdout)
    got = {(p["path"], p["line"], p["code"]) for p in d["problems"] if p["severity"] == "error"}
    assert ("typo.md", 5, "unknown-on") in got
    assert ("nomark.md", 3, "no-essence") in got
    assert not [p for p in d["problems"] if p["path"] == "ok.md"]
    assert d["examined"]["notes"] == 3


def test_lint_on_an_empty_store_is_a_failure(tmp_path):
    store = tmp_path / "empty"
    store.mkdir()
    r = geode(tmp_path / "h", "lint", "--store", str(store), "--json", check=False)
    assert r.returncode == 1
    assert [p["code"] for p in json.loads(r.stdout)["problems"]] == ["empty-store"]


@pytest.mark.slow
def test_hooks_print_writes_nothing_and_install_runs_end_to_end(tmp_path):
    home = tmp_path / "h"
    project = tmp_path / "proj"
    project.mkdir()
    geode(home, "init")
    r = geode(home, "hooks", "install", "--project", str(project), "--print", "--json")
    plan = json.loads(r.stdout)
    assert not (project / ".claude").exists()
    cmd = plan[0]["events"]["PreToolUse"]["command"]
    assert "hookmain.py" in cmd and " -S " in cmd and cmd.endswith("claude")
    user = ("--home-dir", str(tmp_path / "user"))  # the local MCP scope writes ~/.claude.json: never the real one
    r = geode(home, "hooks", "install", "--project", str(project), *user)
    # the default scope is the file nobody commits, and the output names it
    assert not (project / ".claude" / "settings.json").exists()
    assert f"hooks written to {project / '.claude' / 'settings.local.json'} (local scope" in r.stdout
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    installed = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert installed == cmd
    event = {
        "hook_event_name": "PreToolUse",
        "session_id": "e2e",
        "cwd": str(project),
        "tool_name": "Bash",
        "tool_input": {"command": "pytest -k slow | tail -3"},
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env["GEODE_WITHHOLD_RATE"] = "0"
    out = subprocess.run(
        ["/bin/sh", "-c", installed], input=json.dumps(event), capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    ctx = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "test-run-that-ran-nothing" in ctx and "exit-code-through-a-pipe" in ctx
    geode(home, "hooks", "uninstall", "--project", str(project), *user)
    assert "hooks" not in json.loads((project / ".claude" / "settings.local.json").read_text())


@pytest.mark.slow
def test_reindex_counts_what_it_indexed(tmp_path):
    home = tmp_path / "h"
    geode(home, "init")
    d = json.loads(geode(home, "reindex", "--json").stdout)["bindings"]
    assert d["files"] == len(STARTER) and d["crystals"] == len(STARTER)
