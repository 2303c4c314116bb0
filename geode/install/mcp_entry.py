"""geode's MCP server entry: what an agent runs to start the server (:func:`mcp_entry`), how it
is recognised as geode's (:func:`is_owned_mcp_entry`), and where each agent registers it
(:func:`mcp_config_path`).

Apart so that both registrations (Claude Code's JSON in ``geode.install.mcp``, Codex's
``config.toml`` in ``geode.install.codex_toml``) share one definition of the entry.
Standard library only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from geode.install.files import InstallError
from geode.install.hooks import DEFAULT_SCOPE, SCOPES, check_agent, default_home_dir, resolve_scope

MCP_NAME = "geode"
MCP_STARTUP_TIMEOUT_S = 20


def default_mcp_script() -> Path:
    """The server's entry script, in the installed package (``geode/mcp/main.py``)."""
    return Path(os.path.abspath(Path(__file__).parent.parent / "mcp" / "main.py"))


def mcp_entry(
    python: str | None = None,
    *,
    script: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """How an agent starts geode's MCP server: ``{"command", "args"[, "env"]}``.

    The absolute interpreter running the installer and the absolute ``geode/mcp/main.py`` (never
    ``geode`` found on a PATH the agent may not have); ``GEODE_HOME``/``GEODE_STORE`` in ``env``
    only for a non-default home or a one-off store, as in :func:`hook_command`.
    """
    interp = python if python is not None else sys.executable
    if not interp or not os.path.isabs(interp):
        raise InstallError(f"the server's interpreter must be an absolute path, got {interp!r}")
    entry_script = Path(os.path.abspath(script if script is not None else default_mcp_script()))
    env: dict[str, str] = {}
    if home is not None:
        home_path = Path(home).expanduser().resolve()
        if home_path != default_home_dir().resolve():
            env["GEODE_HOME"] = str(home_path)
    if store is not None:
        env["GEODE_STORE"] = str(Path(store).expanduser().resolve())
    out: dict[str, Any] = {"command": os.path.abspath(interp), "args": [str(entry_script)]}
    if env:
        out["env"] = env
    return out


def agent_entry(agent: str, entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` in the form ``agent`` registers it: Claude Code's with ``"type": "stdio"``,
    Codex's with its start-up timeout (:data:`MCP_STARTUP_TIMEOUT_S`)."""
    if agent == "claude":
        return {"type": "stdio", **entry}
    return {**entry, "startup_timeout_sec": MCP_STARTUP_TIMEOUT_S}


def is_owned_mcp_entry(entry: object) -> bool:
    """True for a server entry geode wrote (its first argument is a ``geode/mcp/main.py``)."""
    if not isinstance(entry, dict):
        return False
    args = entry.get("args")
    if not isinstance(args, list) or not args or not isinstance(args[0], str):
        return False
    return args[0].replace("\\", "/").endswith("/geode/mcp/main.py")


def mcp_config_path(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
) -> tuple[Path, tuple[str, ...]]:
    """The file that registers MCP servers for ``agent`` at ``scope``, and the key path of the
    servers' table inside it (see the sources above)."""
    check_agent(agent)
    scope, local = resolve_scope(agent, scope, local)
    scope = scope or DEFAULT_SCOPE[agent]
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")
    if local and (agent != "claude" or scope != "project"):
        raise InstallError("--local exists only for Claude Code at project scope")
    home = Path(os.path.abspath(Path(home_dir).expanduser() if home_dir is not None else Path.home()))
    proj = Path(os.path.abspath(project if project is not None else Path.cwd()))
    if agent == "claude":
        if local:
            return home / ".claude.json", ("projects", str(proj), "mcpServers")
        if scope == "user":
            return home / ".claude.json", ("mcpServers",)
        return proj / ".mcp.json", ("mcpServers",)
    return (home if scope == "user" else proj) / ".codex" / "config.toml", ("mcp_servers",)
