"""``geode hooks install`` registers the MCP server for Claude Code and Codex: idempotent, keeping
everything the user has, refusing what it cannot edit safely, and ``uninstall`` removes only the
entry it added. Every test works in a tmp project and a tmp home (``home_dir``), never ``~``.

The probe is real: one test runs the server's ``--check`` through ``geode/mcp/main.py`` in an
agent-like environment (no virtual environment on PATH, no PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from geode.install import mcp as im
from geode.install.files import InstallError
from geode.install.mcp_entry import MCP_STARTUP_TIMEOUT_S, is_owned_mcp_entry, mcp_entry
from geode.install.probe import verify_mcp_entry

ROOT = Path(__file__).resolve().parent.parent

CODEX_USER = """\
# my Codex settings
model = "o4-mini"   # keep me
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[mcp_servers.docs.env]
DOCS_TOKEN = "abc"

[profiles.fast]
model = "gpt-5-mini"
"""


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    return p


@pytest.fixture()
def home_dir(tmp_path: Path) -> Path:
    p = tmp_path / "userhome"
    p.mkdir()
    return p


@pytest.fixture()
def kw(project: Path, home_dir: Path, tmp_path: Path) -> dict:
    return dict(project=project, home_dir=home_dir, geode_home=tmp_path / "geode-home", verify=False)


def entry_of(kw: dict) -> dict:
    return mcp_entry(home=kw["geode_home"])


# -- the entry ---------------------------------------------------------------------------------
def test_entry_is_the_absolute_interpreter_and_the_entry_script_with_env_only_when_needed(tmp_path: Path) -> None:
    e = mcp_entry()
    assert e["command"] == os.path.abspath(sys.executable)
    assert e["args"] == [str(ROOT / "geode" / "mcp" / "main.py")] and Path(e["args"][0]).is_file()
    assert "env" not in e and is_owned_mcp_entry(e)
    e2 = mcp_entry(home=tmp_path / "h", store=tmp_path / "s")
    assert e2["env"] == {"GEODE_HOME": str((tmp_path / "h").resolve()), "GEODE_STORE": str((tmp_path / "s").resolve())}
    assert "env" not in mcp_entry(home=Path("~/.geode").expanduser())
    with pytest.raises(InstallError, match="absolute path"):
        mcp_entry(python="python3")
    assert not is_owned_mcp_entry({"command": "npx", "args": ["geode-mcp"]})
    assert not is_owned_mcp_entry({"command": "geode", "args": ["mcp"]})


def test_the_probe_starts_the_real_server_like_an_agent_would(tmp_path: Path) -> None:
    geode("init", "--empty", home=tmp_path / "h")  # the server refuses a home that does not exist
    report = verify_mcp_entry(mcp_entry(home=tmp_path / "h"))
    assert report["ok"] and set(report["tools"]) == {
        "search",
        "build_context",
        "read_note",
        "recent_activity",
        "write_note",
    }
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(InstallError, match=r"(?s)exited 3 on --check.*output: boom"):
        verify_mcp_entry({"command": sys.executable, "args": [str(bad)]})
    silent = tmp_path / "silent.py"
    silent.write_text('print(\'{"ok": true, "tools": []}\')\n')
    with pytest.raises(InstallError, match="no search tool"):
        verify_mcp_entry({"command": sys.executable, "args": [str(silent)]})


# -- Claude Code -----------------------------------------------------------------------------------
def test_claude_project_mcp_json_keeps_the_users_servers_and_is_idempotent(project: Path, kw: dict) -> None:
    path = project / ".mcp.json"
    user = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "gh-mcp"], "env": {"T": "x"}}}, "other": 1}
    path.write_text(json.dumps(user, indent=4) + "\n")
    r = im.install_mcp("claude", **kw)
    assert r["added"] and not r["unchanged"] and r["path"] == str(path) and "approve" in r["notice"]
    data = json.loads(path.read_text())
    assert data["mcpServers"]["github"] == user["mcpServers"]["github"] and data["other"] == 1
    assert list(data["mcpServers"]) == ["github", "geode"]
    assert data["mcpServers"]["geode"] == {"type": "stdio", **entry_of(kw)}
    before = path.read_bytes()
    r2 = im.install_mcp("claude", **kw)
    assert r2["unchanged"] and path.read_bytes() == before
    u = im.uninstall_mcp("claude", project=kw["project"], home_dir=kw["home_dir"])
    assert u["removed"] == 1 and json.loads(path.read_text()) == user
    assert im.uninstall_mcp("claude", project=kw["project"], home_dir=kw["home_dir"])["unchanged"]


def test_claude_file_holding_only_our_entry_is_removed_on_uninstall(project: Path, kw: dict) -> None:
    im.install_mcp("claude", **kw)
    assert json.loads((project / ".mcp.json").read_text()) == {
        "mcpServers": {"geode": {"type": "stdio", **entry_of(kw)}}
    }
    im.uninstall_mcp("claude", project=kw["project"], home_dir=kw["home_dir"])
    assert not (project / ".mcp.json").exists()


def test_claude_user_and_local_scope_edit_claude_json_and_keep_its_mode(
    project: Path, home_dir: Path, kw: dict
) -> None:
    path = home_dir / ".claude.json"
    user = {
        "numStartups": 12,
        "projects": {str(project): {"allowedTools": ["Bash"]}},
        "mcpServers": {"fs": {"command": "fs-mcp"}},
    }
    path.write_text(json.dumps(user))
    os.chmod(path, 0o600)
    im.install_mcp("claude", "user", **kw)
    data = json.loads(path.read_text())
    assert data["mcpServers"]["fs"] == {"command": "fs-mcp"} and "geode" in data["mcpServers"]
    assert data["numStartups"] == 12 and data["projects"] == user["projects"]
    assert path.stat().st_mode & 0o777 == 0o600
    im.install_mcp("claude", local=True, **kw)
    data = json.loads(path.read_text())
    assert data["projects"][str(project)]["mcpServers"]["geode"]["args"] == entry_of(kw)["args"]
    assert data["projects"][str(project)]["allowedTools"] == ["Bash"]
    im.uninstall_mcp("claude", local=True, project=kw["project"], home_dir=kw["home_dir"])
    im.uninstall_mcp("claude", "user", project=kw["project"], home_dir=kw["home_dir"])
    assert json.loads(path.read_text()) == user


def test_a_geode_entry_the_user_wrote_is_never_replaced_or_removed(project: Path, kw: dict) -> None:
    path = project / ".mcp.json"
    theirs = {"mcpServers": {"geode": {"command": "/opt/geology/bin/geode-mcp", "args": []}}}
    raw = (json.dumps(theirs) + "\n").encode()
    path.write_bytes(raw)
    with pytest.raises(InstallError, match="not geode's"):
        im.install_mcp("claude", **kw)
    u = im.uninstall_mcp("claude", project=kw["project"], home_dir=kw["home_dir"])
    assert u["removed"] == 0 and "kept" in u and path.read_bytes() == raw


@pytest.mark.parametrize(
    "text, what",
    [('{\n  "mcpServers": [1, 2]\n}\n', "must be an object"), ('{\n  "mcpServers": {,}\n}\n', "line 2 column 18")],
)
def test_claude_files_geode_cannot_edit_are_left_untouched(project: Path, kw: dict, text: str, what: str) -> None:
    path = project / ".mcp.json"
    path.write_text(text)
    with pytest.raises(InstallError, match=what):
        im.install_mcp("claude", **kw)
    assert path.read_text() == text


# -- Codex ----------------------------------------------------------------------------------------
def test_codex_config_toml_gets_one_table_appended_and_uninstall_gives_the_bytes_back(home_dir: Path, kw: dict) -> None:
    path = home_dir / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(CODEX_USER)
    r = im.install_mcp("codex", **kw)
    assert r["added"] and r["path"] == str(path)
    text = path.read_text()
    assert text.startswith(CODEX_USER)  # the user's text, comments included, untouched
    data = tomllib.loads(text)
    assert data["mcp_servers"]["geode"] == {**entry_of(kw), "startup_timeout_sec": MCP_STARTUP_TIMEOUT_S}
    assert data["mcp_servers"]["docs"] == {"command": "npx", "args": ["-y", "docs-mcp"], "env": {"DOCS_TOKEN": "abc"}}
    assert data["profiles"] == {"fast": {"model": "gpt-5-mini"}} and data["model"] == "o4-mini"
    im.install_mcp("codex", **kw)
    assert path.read_text() == text  # byte-identical the second time
    u = im.uninstall_mcp("codex", project=kw["project"], home_dir=kw["home_dir"])
    assert u["removed"] == 1 and path.read_text() == CODEX_USER


def test_codex_stale_entry_in_the_middle_is_replaced_and_what_follows_it_kept(home_dir: Path, kw: dict) -> None:
    path = home_dir / ".codex" / "config.toml"
    path.parent.mkdir()
    old = (
        '[mcp_servers.geode]\ncommand = "/old/python"\nargs = ["/old/geode/mcp/main.py"]\n\n'
        '[mcp_servers.geode.env]\nGEODE_HOME = "/old"\n\n[tui]\nanimations = false\n'
    )
    path.write_text(old)
    r = im.install_mcp("codex", **kw)
    assert r["replaced"] and not r["added"]
    data = tomllib.loads(path.read_text())
    assert data["tui"] == {"animations": False}
    assert data["mcp_servers"]["geode"]["command"] == os.path.abspath(sys.executable)
    assert data["mcp_servers"]["geode"]["env"] == entry_of(kw)["env"]


def test_codex_refresh_keeps_comments_around_our_table_and_moves_it_last(home_dir: Path, kw: dict) -> None:
    path = home_dir / ".codex" / "config.toml"
    path.parent.mkdir()
    im.install_mcp("codex", **kw)
    ours = path.read_text()
    # the user wrote below geode's table (a comment between our table's last key and the next
    # header is read as part of our table, and goes with it, as it did before tomlkit)
    user = "[tui]  # the terminal UI\n# my tweaks\nanimations = false   # off on slow links\n"
    path.write_text(ours + "\n" + user)
    r = im.install_mcp("codex", **{**kw, "python": "/usr/bin/python3"})
    assert r["replaced"]
    text = path.read_text()
    # the comments tomlkit keeps: the user's, at the ends of their lines, and our header's
    assert "# the terminal UI" in text and "# off on slow links" in text and "# my tweaks" in text
    assert text.index("[tui]") < text.index("[mcp_servers.geode]")
    assert text.count("[mcp_servers.geode]") == 1
    assert tomllib.loads(text)["mcp_servers"]["geode"]["command"] == "/usr/bin/python3"
    im.uninstall_mcp("codex", project=kw["project"], home_dir=kw["home_dir"])
    assert "[mcp_servers" not in path.read_text() and "animations = false   # off on slow links" in path.read_text()


def test_codex_table_an_earlier_geode_wrote_goes_with_its_mark_line(home_dir: Path, kw: dict) -> None:
    path = home_dir / ".codex" / "config.toml"
    path.parent.mkdir()
    earlier = (
        "# geode's recall tools: written by `geode hooks install`, removed by `geode hooks uninstall`\n"
        f'[mcp_servers.geode]\ncommand = "{os.path.abspath(sys.executable)}"\nargs = ["/old/geode/mcp/main.py"]\n'
    )
    path.write_text(CODEX_USER + "\n" + earlier)
    u = im.uninstall_mcp("codex", project=kw["project"], home_dir=kw["home_dir"])
    assert u["removed"] == 1 and path.read_text() == CODEX_USER


@pytest.mark.parametrize(
    "text, what",
    [
        ('mcp_servers = { docs = { command = "npx" } }\n', "add it by hand"),
        ('model = "o4\n', "invalid TOML"),
        ('[mcp_servers.geode]\ncommand = "/usr/bin/geode-by-someone-else"\n', "not geode's"),
    ],
)
def test_codex_files_geode_cannot_edit_safely_are_left_untouched(
    home_dir: Path, kw: dict, text: str, what: str
) -> None:
    path = home_dir / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(InstallError, match=what) as exc:
        im.install_mcp("codex", **kw)
    assert str(path) in str(exc.value)
    assert path.read_text() == text


def test_codex_project_scope_and_a_new_file(project: Path, kw: dict) -> None:
    r = im.install_mcp("codex", "project", **kw)
    path = project / ".codex" / "config.toml"
    assert (
        r["path"] == str(path)
        and tomllib.loads(path.read_text())["mcp_servers"]["geode"]["args"] == entry_of(kw)["args"]
    )
    im.uninstall_mcp("codex", "project", project=kw["project"], home_dir=kw["home_dir"])
    assert not path.exists()


# -- the command ---------------------------------------------------------------------------------------
def geode(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT)})
    r = subprocess.run([sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.slow
def test_hooks_install_registers_the_server_for_both_agents_and_print_writes_nothing(
    project: Path, home_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "gh"
    geode("init", "--empty", home=home)  # hooks point at a home that exists (a mistyped one is an error)
    common = ("--agent", "all", "--project", str(project), "--home-dir", str(home_dir))
    plan = json.loads(geode("hooks", "install", *common, "--print", "--json", home=home).stdout)
    # the default scope is the one nobody commits: Claude Code's local scope in ~/.claude.json
    claude_json = home_dir / ".claude.json"
    assert [p["mcp"]["path"] for p in plan] == [str(claude_json), str(home_dir / ".codex" / "config.toml")]
    assert plan[0]["mcp"]["entry"]["args"] == [str(ROOT / "geode" / "mcp" / "main.py")]
    assert plan[0]["mcp"]["entry"]["env"] == {"GEODE_HOME": str(home.resolve())}
    assert "[mcp_servers.geode]" in plan[1]["mcp"]["text"]
    assert not claude_json.exists() and not (home_dir / ".codex").exists()

    geode("hooks", "install", *common, home=home)
    assert not (project / ".mcp.json").exists()
    claude = json.loads(claude_json.read_text())["projects"][str(project)]["mcpServers"]["geode"]
    codex = tomllib.loads((home_dir / ".codex" / "config.toml").read_text())["mcp_servers"]["geode"]
    assert claude["args"] == codex["args"] == plan[0]["mcp"]["entry"]["args"]
    # what was registered starts: the command an agent runs, with the environment it has
    r = subprocess.run(
        [claude["command"], *claude["args"], "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home_dir), **claude["env"]},
    )
    assert r.returncode == 0 and json.loads(r.stdout)["ok"], r.stderr

    geode("hooks", "uninstall", *common, "--no-mcp", home=home)
    assert "geode" in json.loads(claude_json.read_text())["projects"][str(project)]["mcpServers"]
    geode("hooks", "uninstall", *common, home=home)
    assert "geode" not in json.loads(claude_json.read_text()).get("projects", {}).get(str(project), {}).get(
        "mcpServers", {}
    )
    assert not (home_dir / ".codex" / "config.toml").exists()


def test_the_probe_of_a_server_for_a_home_that_does_not_exist_names_the_home(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match=r"(?s)exited 1 on --check.*the geode home .*hoem.* does not exist"):
        verify_mcp_entry(mcp_entry(home=tmp_path / "hoem"))
