"""Codex's ``config.toml``: geode's ``[mcp_servers.geode]`` table added, refreshed or removed
through tomlkit, and every edit checked by parsing.

Apart because the file is the user's: tomlkit edits the document it parsed, so their comments,
layout and other tables stay as they were; the result must then parse (with the standard
library's reader) to the old file's data with only geode's table changed, else it is refused and
never written. Install appends the table at the end; install then uninstall gives the file back
byte for byte. A comment between our table's last key and the next header is part of our table
to tomlkit, so it goes when our table does (as it did when this file was edited by hand).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table
from tomlkit.toml_document import TOMLDocument

from geode.install.files import InstallError
from geode.install.mcp_entry import MCP_NAME, is_owned_mcp_entry

#: The comment on our table's header line: it says who wrote the table and how it goes away.
MCP_TOML_MARK = "# geode's recall tools: written by `geode hooks install`, removed by `geode hooks uninstall`"


class CodexEdit(NamedTuple):
    """What :func:`edit_codex_config` decided: the file's text now, the text to write (None:
    nothing changes), the ``geode`` entry the file holds now (None: none) and the ``stat`` taken
    before the read, for :func:`geode.install.files.atomic_write`."""

    old: str
    new: str | None
    current: dict[str, Any] | None
    stat: os.stat_result | None


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path}: invalid TOML ({exc}); fix it by hand, geode will not rewrite it") from exc


def _table(entry: dict[str, Any]) -> Table:
    """``entry`` as a tomlkit table, keys in the order the README shows, ``env`` inline."""
    table = tomlkit.table()
    table.comment(MCP_TOML_MARK.removeprefix("# "))
    table.add("command", entry["command"])
    table.add("args", list(entry["args"]))
    table.add("startup_timeout_sec", int(entry["startup_timeout_sec"]))
    if entry.get("env"):
        env = tomlkit.inline_table()
        env.update(entry["env"])
        table.add("env", env)
    return table


def _append(doc: TOMLDocument, entry: dict[str, Any]) -> None:
    """Add ``[mcp_servers.geode]`` at the end of ``doc`` (after the user's last table, not among
    their ``mcp_servers``), whether or not the file has an ``mcp_servers`` table yet."""
    holder = tomlkit.table(is_super_table=True)
    holder.add(MCP_NAME, _table(entry))
    doc.append("mcp_servers", holder)


def codex_block(entry: dict[str, Any]) -> str:
    """The text install adds for ``entry`` (what ``geode hooks install --print`` shows)."""
    doc = tomlkit.document()
    _append(doc, entry)
    return tomlkit.dumps(doc)


def _without_geode(data: dict[str, Any]) -> list[dict[str, Any]]:
    """What the file may parse to once our table is gone (the empty ``mcp_servers`` may or may not stay)."""
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


def _remove(doc: TOMLDocument) -> None:
    """Delete our table from ``doc``, and ``mcp_servers`` too when it was only the implicit
    holder of ours (a ``[mcp_servers]`` header the user wrote stays, empty)."""
    servers = doc["mcp_servers"]
    del servers[MCP_NAME]
    if not servers and (not isinstance(servers, Table) or servers.is_super_table()):
        del doc["mcp_servers"]


def _strip_removed(text: str, new: str, was_last: bool) -> str:
    """Tidy what tomlkit leaves where our table was: the mark line an earlier geode wrote above
    the header, and, when our table was the file's last, the blank line install put before it."""
    mark = MCP_TOML_MARK + "\n"
    if mark in text:
        new = new.replace("\n" + mark, "\n", 1) if not new.startswith(mark) else new[len(mark) :]
    if was_last and new.endswith("\n\n"):
        new = new[:-1]
    return new


def _last_is_ours(text: str) -> bool:
    """True when the file's last table header is ``[mcp_servers.geode]`` or one of its sub-tables."""
    headers = [line.strip() for line in text.splitlines() if line.lstrip().startswith("[")]
    if not headers:
        return False
    last = headers[-1].split("#", 1)[0].strip().strip("[]").replace(" ", "").replace('"', "").replace("'", "")
    return last == f"mcp_servers.{MCP_NAME}" or last.startswith(f"mcp_servers.{MCP_NAME}.")


def edit_codex_config(path: Path, entry: dict[str, Any] | None) -> CodexEdit:
    """Install ``entry`` as geode's server in the Codex config at ``path`` (or remove ours when
    ``entry`` is None), returning what to write. The result is parsed and must equal the old
    file's data with only our table changed; anything else is refused, never written."""
    try:
        st = path.stat()
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        st, text = None, ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"{path}: cannot read ({exc}); left untouched") from exc
    data = _parse(text, path)
    servers = data.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise InstallError(f"{path}: mcp_servers must be a table, got {type(servers).__name__}; left untouched")
    cur = (servers or {}).get(MCP_NAME)
    if cur is not None and not is_owned_mcp_entry(cur):
        if entry is None:
            return CodexEdit(text, None, cur, st)
        raise InstallError(
            f"{path}: an MCP server named {MCP_NAME!r} is configured and is not geode's "
            f"(command {cur.get('command') if isinstance(cur, dict) else cur!r}); left untouched: "
            "rename or remove it, then run again"
        )
    if entry is not None and cur is not None and _same(cur, entry):
        return CodexEdit(text, None, cur, st)
    if entry is None and cur is None:
        return CodexEdit(text, None, None, st)
    try:
        rest = text
        if cur is not None:  # a refresh is a removal, then an install at the end
            doc = tomlkit.parse(text)
            _remove(doc)
            rest = _strip_removed(text, tomlkit.dumps(doc), _last_is_ours(text))
        new = rest
        if entry is not None and not rest.strip():
            new = codex_block(entry)
        elif entry is not None:
            doc = tomlkit.parse(rest)
            holder = doc.get("mcp_servers")
            if holder is not None and not isinstance(holder, Table | OutOfOrderTableProxy):
                raise TOMLKitError("mcp_servers is an inline table")
            _append(doc, entry)
            new = tomlkit.dumps(doc)
    except (TOMLKitError, KeyError, TypeError) as exc:
        raise InstallError(
            f"{path}: geode's [mcp_servers.{MCP_NAME}] cannot be edited safely here ({exc}); "
            + ("add it by hand:\n" + codex_block(entry) if entry is not None else "remove it by hand")
        ) from exc
    try:
        parsed: dict[str, Any] | None = _parse(new, path)
    except InstallError:
        parsed = None
    wants = _without_geode(data)
    if entry is not None:
        for want in wants:
            want.setdefault("mcp_servers", {})[MCP_NAME] = entry
    if parsed is None or not any(_same(parsed, want) for want in wants):
        raise InstallError(
            f"{path}: changing [mcp_servers.{MCP_NAME}] would change other settings (is mcp_servers "
            "an inline table, or written with dotted keys?); edit it by hand"
            + (":\n" + codex_block(entry) if entry is not None else "")
        )
    return CodexEdit(text, new, cur, st)
