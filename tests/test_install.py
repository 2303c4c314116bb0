"""Tests for ``geode/install/hooks.py``: the installer must never hurt the user's config.

Every test uses a tmp project and a tmp home, and a stand-in ``hookmain.py`` written into a tmp
folder, so the real ``~/.claude`` and ``~/.codex`` are never touched and the tests do not
depend on the real hook being finished. The probe is real: the stand-in is actually run.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from geode.install import hooks as inst
from geode.install.files import InstallError
from geode.install.probe import verify_command

STAND_IN = """\
import json, os, sys
data = sys.stdin.read()
json.loads(data)  # the probe must be JSON
marker = os.environ.get("GEODE_TEST_MARKER")
if marker:
    with open(marker, "w") as fh:
        json.dump({"argv": sys.argv[1:], "stdin": data, "home": os.environ.get("GEODE_HOME"),
                   "no_site": "site" not in sys.modules}, fh)
"""

USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"], "deny": []},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh", "timeout": 30}]},
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --check"}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "log.sh"}]}],
    },
    "env": {"FOO": "1"},
}


@pytest.fixture()
def hookmain(tmp_path: Path) -> Path:
    """A stand-in hook entry that exits 0 on a JSON probe, like the real one must."""
    d = tmp_path / "pkg dir"  # a space, to prove the quoting
    d.mkdir()
    p = d / "hookmain.py"
    p.write_text(STAND_IN)
    return p


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    return p


@pytest.fixture()
def home_dir(tmp_path: Path) -> Path:
    p = tmp_path / "home"
    p.mkdir()
    return p


def write_json(path: Path, data: object, mode: int | None = None) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = (json.dumps(data, indent=4) + "\n").encode()
    path.write_bytes(raw)
    if mode is not None:
        os.chmod(path, mode)
    return raw


def commands(groups: list[dict]) -> list[str]:
    return [h["command"] for g in groups for h in g["hooks"]]


# -- the command ---------------------------------------------------------------------------


def test_hook_command_is_absolute_interpreter_dash_s_and_agent(hookmain: Path) -> None:
    cmd = inst.hook_command("claude", hookmain=hookmain)
    argv = shlex.split(cmd)
    assert argv == [os.path.abspath(sys.executable), "-S", str(hookmain), "claude"]
    assert "GEODE_HOME" not in cmd and "GEODE_STORE" not in cmd
    assert inst.is_owned_command(cmd)
    assert inst.is_owned_command(inst.hook_command("codex", hookmain=hookmain))


def test_default_hookmain_is_the_delivery_room_of_the_installers_package() -> None:
    cmd = inst.hook_command("claude")
    package = Path(inst.__file__).resolve().parent.parent  # geode/install/hooks.py -> geode/
    assert shlex.split(cmd)[2] == str(package / "delivery" / "hookmain.py")
    assert (package / "delivery" / "hookmain.py").is_file()


def test_hook_command_refuses_a_bare_interpreter(hookmain: Path) -> None:
    with pytest.raises(InstallError, match="absolute"):
        inst.hook_command("claude", "python3", hookmain=hookmain)
    with pytest.raises(InstallError, match="unknown agent"):
        inst.hook_command("cursor", hookmain=hookmain)


def test_env_prefix_only_for_a_non_default_home_or_store(hookmain: Path, tmp_path: Path) -> None:
    default = inst.hook_command("claude", hookmain=hookmain, home=Path("~/.geode").expanduser())
    assert "GEODE_HOME" not in default
    custom = inst.hook_command("claude", hookmain=hookmain, home=tmp_path / "g h", store=tmp_path / "s")
    argv = shlex.split(custom)
    assert argv[0] == f"GEODE_HOME={tmp_path / 'g h'}"
    assert argv[1] == f"GEODE_STORE={tmp_path / 's'}"
    assert inst.is_owned_command(custom)


def test_ownership_regex_is_anchored() -> None:
    ours = [
        "geode hook claude",
        "/opt/bin/geode hook codex",
        "/usr/bin/python3 -S /a/delivery/hookmain.py claude",
        "GEODE_HOME=/x '/p y/python' -S '/a b/delivery/hookmain.py' codex",
        "geode-hook claude",
    ]
    theirs = [
        "echo geode hook claude >> log",
        "python hookmain.py claude-notes",
        "geode hook claude --debug",
        "my-hookmain.pyc claude",
        "~/bin/guard.sh",
    ]
    assert all(inst.is_owned_command(c) for c in ours)
    assert not any(inst.is_owned_command(c) for c in theirs)


# -- verification --------------------------------------------------------------------------


def test_verify_really_runs_the_command_with_a_probe(hookmain: Path, tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "marker.json"
    monkeypatch.setenv("GEODE_TEST_MARKER", str(marker))
    cmd = inst.hook_command("codex", hookmain=hookmain, home=tmp_path / "gh")
    verify_command(cmd)
    seen = json.loads(marker.read_text())
    assert seen["argv"] == ["codex"]
    assert json.loads(seen["stdin"]) == {"hook_event_name": "Probe"}
    assert seen["home"] == str(tmp_path / "gh")  # the env prefix is valid shell
    assert seen["no_site"] is True  # -S reached the interpreter


def test_verify_refuses_failing_and_json_garbage_commands(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sys; sys.exit(1)\n")
    with pytest.raises(InstallError, match="exited 1"):
        verify_command(f"{sys.executable} -S {bad} claude")
    garbage = tmp_path / "garbage.py"
    garbage.write_text("print('{not json')\n")
    with pytest.raises(InstallError, match="invalid JSON"):
        verify_command(f"{sys.executable} -S {garbage} claude")
    slow = tmp_path / "slow.py"
    slow.write_text("import time; time.sleep(5)\n")
    with pytest.raises(InstallError, match="did not finish"):
        verify_command(f"{sys.executable} -S {slow} claude", timeout=0.5)


def test_nonexistent_interpreter_refuses_and_writes_nothing(hookmain: Path, project: Path, home_dir: Path) -> None:
    ghost = str(project / "no" / "python")
    with pytest.raises(InstallError, match="not installed"):
        inst.install("claude", "project", project=project, python=ghost, hookmain=hookmain)
    assert not (project / ".claude").exists()
    path = home_dir / ".codex" / "hooks.json"
    raw = write_json(path, {"hooks": {}})
    with pytest.raises(InstallError):
        inst.install("codex", "user", home_dir=home_dir, python=ghost, hookmain=hookmain)
    assert path.read_bytes() == raw
    assert sorted(p.name for p in path.parent.iterdir()) == ["hooks.json"]  # no temp left behind


def test_missing_hookmain_refuses(project: Path, tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="exited 2"):
        inst.install("claude", project=project, hookmain=tmp_path / "nope" / "hookmain.py")
    assert not (project / ".claude" / "settings.json").exists()


def test_the_real_hookmain_passes_the_probe(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "gh"))
    for agent in inst.AGENTS:
        verify_command(inst.hook_command(agent))


# -- Claude Code -----------------------------------------------------------------------------


def test_install_keeps_user_hooks_in_order_and_other_settings(hookmain: Path, project: Path) -> None:
    path = project / ".claude" / "settings.json"
    write_json(path, USER_SETTINGS)
    res = inst.install("claude", "project", project=project, hookmain=hookmain)
    data = json.loads(path.read_text())
    cmd = inst.hook_command("claude", hookmain=hookmain)

    assert res["path"] == str(path) and res["unchanged"] is False and res["removed"] == 0
    assert res["added"] == [
        "PreToolUse",
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "SessionEnd",
        "PostToolUse",
        "PostToolUseFailure",
    ]
    assert list(data) == ["model", "permissions", "hooks", "env"]
    assert {k: data[k] for k in ("model", "permissions", "env")} == {
        k: USER_SETTINGS[k] for k in ("model", "permissions", "env")
    }
    user_hooks = USER_SETTINGS["hooks"]
    assert data["hooks"]["PreToolUse"][:2] == user_hooks["PreToolUse"]
    assert data["hooks"]["PreToolUse"][2] == {
        "matcher": "Bash|Write|Edit|MultiEdit|NotebookEdit|Read|Grep|Glob",
        "hooks": [{"type": "command", "command": cmd, "timeout": 10}],
    }
    assert data["hooks"]["Stop"] == user_hooks["Stop"] + [
        {"hooks": [{"type": "command", "command": cmd, "timeout": 5}]}
    ]
    # the user's PostToolUse group keeps its place; geode's (docs/CAPTURE.md) comes after it
    assert data["hooks"]["PostToolUse"] == user_hooks["PostToolUse"] + [
        {
            "matcher": "Bash|Write|Edit|MultiEdit|NotebookEdit",
            "hooks": [{"type": "command", "command": cmd, "timeout": 5}],
        }
    ]
    assert data["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert "matcher" not in data["hooks"]["UserPromptSubmit"][0]
    assert data["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 5


def test_mixed_group_keeps_user_handlers_and_stale_geode_entries_are_replaced(hookmain: Path, project: Path) -> None:
    path = project / ".claude" / "settings.json"
    write_json(
        path,
        {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": "Bash",
                        "hooks": [
                            {"type": "command", "command": "guard.sh"},
                            {"type": "command", "command": "/old/venv/bin/geode hook claude"},
                            {"type": "command", "command": "audit.sh"},
                        ],
                    },
                    {
                        "matcher": "Read",
                        "hooks": [{"type": "command", "command": "/old/py -S /old/hookmain.py claude"}],
                    },
                    {"matcher": "Glob", "hooks": [{"type": "command", "command": "tail.sh"}]},
                ],
                "PreCompact": [{"hooks": [{"type": "command", "command": "geode hook claude"}]}],
            }
        },
    )
    res = inst.install("claude", project=project, hookmain=hookmain)
    hooks = json.loads(path.read_text())["hooks"]
    cmd = inst.hook_command("claude", hookmain=hookmain)
    pre = hooks["PreToolUse"]
    assert pre[0] == {
        "matcher": "Bash",
        "hooks": [{"type": "command", "command": "guard.sh"}, {"type": "command", "command": "audit.sh"}],
    }
    assert pre[1] == {"matcher": "Glob", "hooks": [{"type": "command", "command": "tail.sh"}]}  # emptied group dropped
    assert commands(pre[2:]) == [cmd] and len(pre) == 3
    assert "PreCompact" not in hooks  # our retired entry went, and the event emptied by it
    assert res["removed"] == 3


def test_install_twice_is_byte_identical(hookmain: Path, project: Path) -> None:
    path = project / ".claude" / "settings.json"
    write_json(path, USER_SETTINGS)
    inst.install("claude", project=project, hookmain=hookmain)
    first = path.read_bytes()
    st1 = path.stat()
    res = inst.install("claude", project=project, hookmain=hookmain)
    assert path.read_bytes() == first
    assert path.stat().st_mtime_ns == st1.st_mtime_ns  # not even rewritten
    assert res == {**res, "added": [], "removed": 0, "unchanged": True}


def test_reinstall_moves_ours_after_groups_the_user_added_later(hookmain: Path, project: Path) -> None:
    path = project / ".claude" / "settings.json"
    inst.install("claude", project=project, hookmain=hookmain)
    data = json.loads(path.read_text())
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "later.sh"}]})
    write_json(path, data)
    res = inst.install("claude", project=project, hookmain=hookmain)
    stop = json.loads(path.read_text())["hooks"]["Stop"]
    assert commands(stop) == ["later.sh", inst.hook_command("claude", hookmain=hookmain)]
    assert res["unchanged"] is False and res["added"] == [] and res["removed"] == 0


def test_uninstall_restores_the_user_content(hookmain: Path, project: Path) -> None:
    path = project / ".claude" / "settings.json"
    write_json(path, USER_SETTINGS)
    inst.install("claude", project=project, hookmain=hookmain)
    res = inst.uninstall("claude", project=project)
    assert json.loads(path.read_text()) == USER_SETTINGS
    assert res["removed"] == 7 and res["unchanged"] is False
    again = inst.uninstall("claude", project=project)
    assert again["removed"] == 0 and again["unchanged"] is True


def test_uninstall_drops_hooks_key_only_when_emptied(hookmain: Path, project: Path) -> None:
    path = project / ".claude" / "settings.local.json"
    original = {"permissions": {"allow": []}}
    write_json(path, original)
    inst.install("claude", project=project, local=True, hookmain=hookmain)
    assert "hooks" in json.loads(path.read_text())
    inst.uninstall("claude", project=project, local=True)
    assert json.loads(path.read_text()) == original

    kept = {"hooks": {}, "x": 1}
    raw = write_json(path, kept)
    res = inst.uninstall("claude", project=project, local=True)
    assert res["unchanged"] is True and path.read_bytes() == raw  # nothing of ours: untouched


def test_uninstall_of_a_missing_file_creates_nothing(project: Path, home_dir: Path) -> None:
    res = inst.uninstall("claude", "user", home_dir=home_dir)
    assert res["unchanged"] is True and res["path"] == str(home_dir / ".claude" / "settings.json")
    assert not (home_dir / ".claude").exists()


@pytest.mark.parametrize(
    ("text", "line"),
    [('{\n  "model": "opus",\n  "hooks": {,}\n}\n', 3), ('{\n "a": 1\n "b": 2\n}', 3)],
)
def test_malformed_json_names_file_and_line_and_is_untouched(
    hookmain: Path, project: Path, text: str, line: int
) -> None:
    path = project / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(text)
    raw = path.read_bytes()
    for op in (
        lambda: inst.install("claude", project=project, hookmain=hookmain),
        lambda: inst.uninstall("claude", project=project),
    ):
        with pytest.raises(InstallError) as err:
            op()
        assert str(path) in str(err.value) and f"line {line} column" in str(err.value)
        assert path.read_bytes() == raw
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


@pytest.mark.parametrize(
    ("data", "what"),
    [([1, 2], "top level"), ({"hooks": []}, '"hooks" must be an object'), ({"hooks": {"Stop": {}}}, '"Stop"')],
)
def test_wrong_types_are_refused_not_rewritten(hookmain: Path, project: Path, data: object, what: str) -> None:
    path = project / ".claude" / "settings.json"
    raw = write_json(path, data)
    with pytest.raises(InstallError) as err:
        inst.install("claude", project=project, hookmain=hookmain)
    assert str(path) in str(err.value) and what in str(err.value)
    assert path.read_bytes() == raw


def test_mode_0600_is_preserved(hookmain: Path, home_dir: Path) -> None:
    path = home_dir / ".claude" / "settings.json"
    write_json(path, {"model": "x"}, mode=0o600)
    inst.install("claude", "user", home_dir=home_dir, hookmain=hookmain)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "hooks" in json.loads(path.read_text())
    inst.uninstall("claude", "user", home_dir=home_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"model": "x"}


def test_mode_survives_a_narrow_umask(hookmain: Path, project: Path) -> None:
    """The temp file is created under the umask; the original mode must still win."""
    path = project / ".claude" / "settings.json"
    write_json(path, {"model": "x"}, mode=0o644)
    old = os.umask(0o077)
    try:
        inst.install("claude", project=project, hookmain=hookmain)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_symlinked_settings_are_written_through(hookmain: Path, project: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    write_json(real, {"model": "x"})
    link = project / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    inst.install("claude", project=project, hookmain=hookmain)
    assert link.is_symlink()
    assert "hooks" in json.loads(real.read_text())


def test_print_plan_writes_nothing(hookmain: Path, project: Path, home_dir: Path) -> None:
    before = sorted(p for p in project.parent.rglob("*"))
    for agent in inst.AGENTS:
        p = inst.plan(agent, project=project, home_dir=home_dir, hookmain=hookmain)
        json.dumps(p)  # --json must be able to print it
        cmd = inst.hook_command(agent, hookmain=hookmain)
        assert set(p["events"]) == {s.event for s in inst.EVENTS[agent]}
        assert all(e["command"] == cmd for e in p["events"].values())
    claude = inst.plan("claude", project=project, home_dir=home_dir, hookmain=hookmain)
    assert claude["path"] == str(project / ".claude" / "settings.json")
    claude_cmd = inst.hook_command("claude", hookmain=hookmain)
    assert claude["events"]["Stop"] == {"matcher": None, "command": claude_cmd, "timeout": 5}
    codex = inst.plan("codex", home_dir=home_dir, hookmain=hookmain)
    assert codex["path"] == str(home_dir / ".codex" / "hooks.json") and codex["scope"] == "user"
    assert sorted(p for p in project.parent.rglob("*")) == before


# -- Codex ---------------------------------------------------------------------------------


def test_codex_emits_only_known_keys(hookmain: Path, home_dir: Path) -> None:
    res = inst.install("codex", home_dir=home_dir, hookmain=hookmain)
    path = home_dir / ".codex" / "hooks.json"
    assert res["path"] == str(path)
    assert "/hooks" in res["notice"] and "trust" in res["notice"]
    data = json.loads(path.read_text())
    assert set(data) == {"hooks"}
    hooks = data["hooks"]
    assert list(hooks) == ["PreToolUse", "SessionStart", "UserPromptSubmit", "Stop", "PostToolUse"]
    assert "SessionEnd" not in hooks and "PostToolUseFailure" not in hooks  # Codex has neither
    for event, groups in hooks.items():
        assert len(groups) == 1
        group = groups[0]
        expected = {"matcher", "hooks"} if event in ("PreToolUse", "SessionStart", "PostToolUse") else {"hooks"}
        assert set(group) == expected
        assert len(group["hooks"]) == 1
        assert set(group["hooks"][0]) == {"type", "command", "timeout"}
        assert group["hooks"][0]["type"] == "command"
        assert isinstance(group["hooks"][0]["timeout"], int)
    assert hooks["PreToolUse"][0]["matcher"] == "Bash|apply_patch|Edit|Write"
    assert shlex.split(hooks["Stop"][0]["hooks"][0]["command"])[-1] == "codex"


def test_codex_project_scope_and_scope_errors(hookmain: Path, project: Path, home_dir: Path) -> None:
    res = inst.install("codex", "project", project=project, home_dir=home_dir, hookmain=hookmain)
    assert res["path"] == str(project / ".codex" / "hooks.json")
    assert not (home_dir / ".codex").exists()
    with pytest.raises(InstallError, match="--local"):
        inst.settings_path("codex", "project", project=project, local=True)
    with pytest.raises(InstallError, match="--local"):
        inst.settings_path("claude", "user", home_dir=home_dir, local=True)
    with pytest.raises(InstallError, match="scope"):
        inst.settings_path("claude", "global")
    assert inst.resolve_agents("all") == ["claude", "codex"]


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True, timeout=30)


def test_local_scope_in_a_git_work_tree_is_added_to_its_gitignore_once(hookmain: Path, project: Path) -> None:
    assert _git(project, "init", "-q").returncode == 0
    (project / ".gitignore").write_text("node_modules", encoding="utf-8")  # no final newline: kept intact
    res = inst.install("claude", "local", project=project, hookmain=hookmain)
    local = project / ".claude" / "settings.local.json"
    assert res["path"] == str(local) and res["gitignore"] == str(project / ".gitignore")
    assert _git(project, "check-ignore", "-q", ".claude/settings.local.json").returncode == 0
    assert (project / ".gitignore").read_text(encoding="utf-8").splitlines()[0] == "node_modules"
    _git(project, "add", "-A")
    assert ".claude/settings.local.json" not in _git(project, "diff", "--cached", "--name-only").stdout
    again = inst.install("claude", "local", project=project, hookmain=hookmain)
    assert "gitignore" not in again  # already ignored: nothing added twice
    assert (project / ".gitignore").read_text(encoding="utf-8").count("settings.local.json") == 1


def test_local_scope_leaves_an_ignoring_or_absent_work_tree_alone(
    hookmain: Path, project: Path, tmp_path: Path
) -> None:
    res = inst.install("claude", "local", project=project, hookmain=hookmain)  # not a git work tree
    assert "gitignore" not in res and not (project / ".gitignore").exists()
    other = tmp_path / "other"
    other.mkdir()
    assert _git(other, "init", "-q").returncode == 0
    (other / ".gitignore").write_text(".claude/\n", encoding="utf-8")
    res = inst.install("claude", "local", project=other, hookmain=hookmain)
    assert "gitignore" not in res and (other / ".gitignore").read_text(encoding="utf-8") == ".claude/\n"
