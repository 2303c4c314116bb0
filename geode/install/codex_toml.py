"""Codex's ``config.toml``: geode's ``[mcp_servers.geode]`` table added, refreshed or removed by
editing the text, and every edit checked by parsing.

Apart because TOML is edited as text (no round-trip writer keeps the user's comments and layout):
the result must parse to the old file's data with only geode's table changed, else it is refused
and never written; install then uninstall gives the file back byte for byte.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from geode.install.files import InstallError
from geode.install.mcp_entry import MCP_NAME, is_owned_mcp_entry

MCP_TOML_MARK = "# geode's recall tools: written by `geode hooks install`, removed by `geode hooks uninstall`"
_TOML_OURS = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(?:geode|"geode"|'geode')\s*(?:\.[^\]]*)?\]\s*(?:#.*)?$""")
_TOML_HEADER = re.compile(r"""^\s*\[\[?\s*[A-Za-z0-9_"'][^\[\]]*\]\]?\s*(?:#.*)?$""")


def _toml_parse(text: str, path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path}: invalid TOML ({exc}); fix it by hand, geode will not rewrite it") from exc


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a TOML basic string


def _toml_block(entry: dict[str, Any]) -> str:
    lines = [
        MCP_TOML_MARK,
        f"[mcp_servers.{MCP_NAME}]",
        f"command = {_toml_str(entry['command'])}",
        f"args = [{', '.join(_toml_str(a) for a in entry['args'])}]",
        f"startup_timeout_sec = {int(entry['startup_timeout_sec'])}",
    ]
    if entry.get("env"):
        lines.append("env = { " + ", ".join(f"{k} = {_toml_str(v)}" for k, v in entry["env"].items()) + " }")
    return "\n".join(lines) + "\n"


def _toml_strip(text: str) -> str:
    """``text`` without the ``[mcp_servers.geode]`` table (and its sub-tables and our mark line).

    Install appends a blank line and the block; when the block is still last, that blank line
    goes with it, so install then uninstall gives the file back byte for byte."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if _TOML_OURS.match(line):
            skipping = True
            if out and out[-1].rstrip("\r\n") == MCP_TOML_MARK:
                out.pop()
            continue
        if skipping and _TOML_HEADER.match(line):
            skipping = False
        if not skipping:
            out.append(line)
    new = "".join(out)
    if skipping and new.endswith("\n\n"):
        new = new[:-1]
    return new


def _without_geode(data: dict[str, Any]) -> list[dict[str, Any]]:
    """What the file parses to once our table is gone (the empty ``mcp_servers`` may or may not stay)."""
    base = json.loads(json.dumps(data, default=str))
    servers = base.get("mcp_servers")
    if not isinstance(servers, dict) or MCP_NAME not in servers:
        return [base]
    del servers[MCP_NAME]
    if servers:
        return [base]
    other = json.loads(json.dumps(base))
    del other["mcp_servers"]
    return [base, other]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _toml_edit(
    path: Path, entry: dict[str, Any] | None
) -> tuple[str, str | None, dict[str, Any] | None, os.stat_result | None]:
    """(old text, new text or None when nothing changes, the current geode entry, stat) for
    installing ``entry`` (or removing ours when None). The result is parsed and must equal the
    old file's data with only our table changed; anything else is refused, never written."""
    try:
        st = path.stat()
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        st, text = None, ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"{path}: cannot read ({exc}); left untouched") from exc
    data = _toml_parse(text, path)
    servers = data.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise InstallError(f"{path}: mcp_servers must be a table, got {type(servers).__name__}; left untouched")
    cur = (servers or {}).get(MCP_NAME)
    if cur is not None and not is_owned_mcp_entry(cur):
        if entry is None:
            return text, None, cur, st
        raise InstallError(
            f"{path}: an MCP server named {MCP_NAME!r} is configured and is not geode's "
            f"(command {cur.get('command') if isinstance(cur, dict) else cur!r}); left untouched: "
            "rename or remove it, then run again"
        )
    if entry is not None and cur is not None and _same(cur, entry):
        return text, None, cur, st
    if entry is None and cur is None:
        return text, None, None, st
    stripped = _toml_strip(text) if cur is not None else text
    rest = _toml_parse(stripped, path)
    if not any(_same(rest, want) for want in _without_geode(data)):
        raise InstallError(
            f"{path}: geode's [mcp_servers.{MCP_NAME}] is not a plain table geode can edit safely "
            "(an inline table or dotted keys?); edit it by hand"
        )
    if entry is None:
        return text, stripped, cur, st
    sep = "" if not stripped.strip() else ("\n" if stripped.endswith("\n") else "\n\n")
    new = (stripped if stripped.strip() else "") + sep + _toml_block(entry)
    try:
        parsed: dict[str, Any] | None = _toml_parse(new, path)
    except InstallError:
        parsed = None  # e.g. an inline mcp_servers table cannot take a [mcp_servers.geode] header
    expect = json.loads(json.dumps(rest, default=str))
    expect.setdefault("mcp_servers", {})[MCP_NAME] = entry
    if parsed is None or not _same(parsed, expect):
        raise InstallError(
            f"{path}: adding [mcp_servers.{MCP_NAME}] would change other settings (is mcp_servers "
            "an inline table?); add it by hand:\n" + _toml_block(entry)
        )
    return text, new, cur, st
