"""``geode hooks install|uninstall`` for the MCP server: geode's recall tools registered for
Claude Code (``.mcp.json``, ``~/.claude.json``) and Codex (``config.toml``), beside the hooks.

Apart from the hooks (``geode.install.hooks``) because it edits other files with other
formats; the entry itself is ``geode.install.mcp_entry``, Codex's TOML edit
``geode.install.codex_toml``, the probe ``geode.install.probe``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from geode.install.codex_toml import codex_block, edit_codex_config
from geode.install.files import InstallError, atomic_write, dump_config, load_config
from geode.install.hooks import DEFAULT_SCOPE
from geode.install.mcp_entry import MCP_NAME, agent_entry, is_owned_mcp_entry, mcp_config_path, mcp_entry
from geode.install.probe import verify_mcp_entry

# Formats (sources checked when this was written):
#
# * Claude Code, https://code.claude.com/docs/en/mcp ("MCP installation scopes"). Project scope:
#   ``.mcp.json`` at the project root, ``{"mcpServers": {name: {"type": "stdio", "command",
#   "args", "env"}}}``, meant for version control; Claude Code asks each person once to approve a
#   project server. User scope: the top-level ``"mcpServers"`` of ``~/.claude.json``. Local scope
#   (this project, this person): the same object under ``"projects" -> <absolute project path>``
#   of ``~/.claude.json``.
# * Codex, https://developers.openai.com/codex/mcp and ``docs/config.md`` of openai/codex: a
#   table ``[mcp_servers.<name>]`` with ``command``, ``args``, ``env`` and
#   ``startup_timeout_sec`` (default 10 s) in ``~/.codex/config.toml``, or in
#   ``.codex/config.toml`` of a trusted project. Codex passes only a short allow-list of the
#   environment to a server, so what the server needs (GEODE_HOME) goes into ``env``.
#
# What is ours: the entry named ``geode`` whose first argument is a ``geode/mcp/main.py``.
# A ``geode`` entry the user wrote is never replaced or removed.

CLAUDE_MCP_NOTICE = (
    "Claude Code asks once to approve the servers of a project's .mcp.json; `/mcp` in Claude Code shows geode's tools."
)


def _table(data: dict[str, Any], keys: tuple[str, ...], path: Path, create: bool) -> dict[str, Any] | None:
    cur: Any = data
    for i, k in enumerate(keys):
        nxt = cur.get(k)
        if nxt is None:
            if not create:
                return None
            nxt = cur[k] = {}
        elif not isinstance(nxt, dict):
            where = ".".join(json.dumps(x) for x in keys[: i + 1])
            raise InstallError(f"{path}: {where} must be an object, got {type(nxt).__name__}; left untouched")
        cur = nxt
    return cur


def _drop_empty(data: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Remove the servers' table (and only it) when our removal left it empty."""
    parent = _table(data, keys[:-1], Path(""), create=False) if len(keys) > 1 else data
    if isinstance(parent, dict) and parent.get(keys[-1]) == {}:
        del parent[keys[-1]]


# -- the public operations for the MCP server ---------------------------------------------------


def plan_mcp(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
    python: str | None = None,
    script: str | os.PathLike[str] | None = None,
    geode_home: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    **_ignored: Any,
) -> dict[str, Any]:
    """What :func:`install_mcp` would write, for ``--print [--json]``; reads and writes nothing."""
    path, keys = mcp_config_path(agent, scope, project=project, home_dir=home_dir, local=local)
    want = agent_entry(agent, mcp_entry(python, script=script, home=geode_home, store=store))
    if agent == "claude":
        text = json.dumps({"mcpServers": {MCP_NAME: want}}, indent=2, ensure_ascii=False)
    else:
        text = codex_block(want)
    return {
        "agent": agent,
        "scope": "local" if local else (scope or DEFAULT_SCOPE[agent]),
        "path": str(path),
        "key": ".".join(keys) + f".{MCP_NAME}",
        "name": MCP_NAME,
        "entry": want,
        "text": text,
    }


def install_mcp(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
    python: str | None = None,
    script: str | os.PathLike[str] | None = None,
    geode_home: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    verify: bool = True,
    **_ignored: Any,
) -> dict[str, Any]:
    """Register (or refresh) geode's MCP server for ``agent``; idempotent, keeps the rest.

    A file we cannot parse, a servers' table of the wrong type or a ``geode`` entry that is not
    ours is refused with the file named; an unchanged entry leaves the file byte-identical.
    Returns ``{"agent", "path", "name", "entry", "added", "replaced", "unchanged"}`` (plus
    ``"notice"`` for Claude Code's project scope).
    """
    path, keys = mcp_config_path(agent, scope, project=project, home_dir=home_dir, local=local)
    entry = mcp_entry(python, script=script, home=geode_home, store=store)
    want = agent_entry(agent, entry)
    if agent == "claude":
        loaded = load_config(path)
        new = json.loads(json.dumps(loaded.data))
        servers = _table(new, keys, path, create=True)
        assert servers is not None
        cur = servers.get(MCP_NAME)
        if cur is not None and not is_owned_mcp_entry(cur):
            raise InstallError(
                f"{path}: an MCP server named {MCP_NAME!r} is configured and is not geode's "
                f"(command {cur.get('command') if isinstance(cur, dict) else cur!r}); left untouched: "
                "rename or remove it, then run again"
            )
        unchanged = cur == want and loaded.raw is not None
        if not unchanged:
            if verify:
                verify_mcp_entry(entry)
            servers[MCP_NAME] = want
            atomic_write(path, dump_config(new), loaded.stat)
    else:
        _old, text, cur, st = edit_codex_config(path, want)
        unchanged = text is None
        if text is not None:
            if verify:
                verify_mcp_entry(entry)
            atomic_write(path, text.encode("utf-8"), st)
    result: dict[str, Any] = {
        "agent": agent,
        "path": str(path),
        "name": MCP_NAME,
        "entry": want,
        "added": cur is None,
        "replaced": cur is not None and not unchanged,
        "unchanged": unchanged,
    }
    if agent == "claude" and not local and (scope or DEFAULT_SCOPE[agent]) == "project":
        result["notice"] = CLAUDE_MCP_NOTICE
    return result


def uninstall_mcp(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
    **_ignored: Any,
) -> dict[str, Any]:
    """Remove geode's server entry (only ours) for ``agent`` at ``scope``; leave the rest as it was.

    The servers' table goes only when our removal emptied it; a file that held nothing but our
    entry is removed; a missing file stays missing. Returns ``{"agent", "path", "removed",
    "unchanged"}`` (``"kept"`` names a ``geode`` entry that is not ours).
    """
    path, keys = mcp_config_path(agent, scope, project=project, home_dir=home_dir, local=local)
    result: dict[str, Any] = {"agent": agent, "path": str(path), "name": MCP_NAME, "removed": 0, "unchanged": True}
    if agent == "claude":
        loaded = load_config(path)
        new = json.loads(json.dumps(loaded.data))
        servers = _table(new, keys, path, create=False)
        cur = servers.get(MCP_NAME) if servers is not None else None
        if servers is None or cur is None:
            return result
        if not is_owned_mcp_entry(cur):
            result["kept"] = f"{MCP_NAME!r} is not geode's entry"
            return result
        del servers[MCP_NAME]
        _drop_empty(new, keys)
        if new == {}:
            os.unlink(path)
        else:
            atomic_write(path, dump_config(new), loaded.stat)
    else:
        _old, text, cur, st = edit_codex_config(path, None)
        if cur is not None and not is_owned_mcp_entry(cur):
            result["kept"] = f"{MCP_NAME!r} is not geode's entry"
            return result
        if text is None:
            return result
        if not text.strip():
            os.unlink(path)
        else:
            atomic_write(path, text.encode("utf-8"), st)
    result.update(removed=1, unchanged=False)
    return result
