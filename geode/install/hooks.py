"""``geode hooks install|uninstall``: write geode's hook entries into Claude Code and Codex config.

Why this module is careful (Claude Code's and Codex's published hook protocols):

* The hook runs before *every* tool call. A command that does not exist is not harmless: the
  original product's installer wrote one (docs/DESIGN.md, "Lessons"), and every tool call failed. So the exact command is
  run once with a harmless probe (:func:`verify_command`) before anything is written.
* The files belong to the user. Claude Code's ``settings.json`` carries permissions, models and
  the user's own hooks, so edits are surgical: our entries are recognised by an end-anchored
  regex on the command (:data:`OWNED_COMMAND_RE`), install = strip ours then append, user groups
  keep their order, a mixed group keeps the user's handlers, and nothing else is touched.
* A file we cannot parse is never rewritten: the error names the file, line and column.
* Writes are atomic (same-folder temp file, fsync, ``os.replace``, fsync of the folder) and keep
  the file's mode, so a ``0600`` settings file stays private and a crash never leaves half a file.
* Codex parses its config with ``deny_unknown_fields`` and trusts hooks by hash, so its emitter
  writes only ``type``/``command``/``timeout`` and the report tells the user to trust the hooks.

Standard library only: the CLI imports this lazily and it must not pull in the record models.

Where each part lives: this module writes the hooks (Claude Code's ``settings.json``, Codex's
``hooks.json``); ``install_files`` reads and writes the files and holds :class:`InstallError`,
``install_probe`` runs the hook command (and the MCP server) once before anything is written,
``install_mcp`` registers the MCP server (its entry in ``install_mcp_entry``, Codex's
``config.toml`` edit in ``install_codex_toml``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geode.delivery import events as hook_events
from geode.install.files import InstallError, atomic_write, dump_config, load_config
from geode.install.probe import verify_command

AGENTS: tuple[str, ...] = ("claude", "codex")
SCOPES: tuple[str, ...] = ("project", "user")

#: Where each agent's hooks go when no scope is named. Claude Code reads project settings
#: without ceremony; Codex loads a project ``.codex/`` layer only once that layer is trusted,
#: so its natural home is the user file ``~/.codex/hooks.json``.
DEFAULT_SCOPE: dict[str, str] = {"claude": "project", "codex": "user"}

#: The scope ``geode hooks install`` uses when none is named: the one nobody commits. The
#: commands hold this machine's absolute paths (the interpreter, hookmain.py, GEODE_HOME), so
#: they belong in a file of this person on this machine: Claude Code's git-ignored
#: ``.claude/settings.local.json`` (and its MCP "local" scope in ``~/.claude.json``); Codex has
#: no such project file, so its local scope is the user's own ``~/.codex``.
LOCAL_SCOPE = "local"
CLI_SCOPES: tuple[str, ...] = (LOCAL_SCOPE, *SCOPES)


def resolve_scope(agent: str, scope: str | None, local: bool = False) -> tuple[str | None, bool]:
    """``(scope, local)`` as the path functions take them, for a scope that may be ``"local"``:
    Claude Code's local scope is its project scope's git-ignored file; Codex's is the user scope."""
    if scope != LOCAL_SCOPE:
        return scope, local
    return ("project", True) if agent == "claude" else ("user", False)


def shared_scope(agent: str, scope: str | None, local: bool = False) -> bool:
    """Whether the file written at this scope is one a team commits (a project's own files)."""
    scope, local = resolve_scope(agent, scope, local)
    return (scope or DEFAULT_SCOPE[agent]) == "project" and not local


#: Recognises a handler command as geode's, whatever interpreter, quoting or env prefix it has.
#: Anchored at the end so a user command that merely mentions geode is never taken for ours.
OWNED_COMMAND_RE = re.compile(r"""(?:^|[\s/'"])(?:hookmain\.py['"]?|geode\s+hook|geode-hook)\s+(?:claude|codex)\s*$""")

CODEX_TRUST_NOTICE = (
    "Codex runs a new or changed hook only after you trust it: open /hooks in Codex and trust "
    "the geode entries (trust is recorded by hash, so re-trust after any reinstall that changed "
    "the command). On Codex older than 0.124 also set `[features] codex_hooks = true` in "
    "~/.codex/config.toml."
)


@dataclass(frozen=True)
class EventSpec:
    """One event geode listens on: its matcher (None: the event takes none) and timeout in s."""

    event: str
    matcher: str | None
    timeout: int


#: The events, matchers and timeouts come from ``geode.delivery.events``, the list the hook reads.
CLAUDE_EVENTS: tuple[EventSpec, ...] = tuple(EventSpec(*e) for e in hook_events.CLAUDE)
CODEX_EVENTS: tuple[EventSpec, ...] = tuple(EventSpec(*e) for e in hook_events.CODEX)

EVENTS: dict[str, tuple[EventSpec, ...]] = {"claude": CLAUDE_EVENTS, "codex": CODEX_EVENTS}


# -- the command ---------------------------------------------------------------------------


def default_hookmain() -> Path:
    """The hook's fast entry, next to this file, so the command follows the installed package."""
    return Path(os.path.abspath(Path(__file__).parent.parent / "delivery" / "hookmain.py"))


def default_home_dir() -> Path:
    """``~/.geode``, the home geode uses when none is given: a command or entry for this home
    carries no ``GEODE_HOME=``, so the usual one stays short and the same on every machine."""
    return Path("~/.geode").expanduser()


def check_agent(agent: str) -> None:
    """Refuse an agent geode has no installer for (:data:`AGENTS`), naming the ones it has."""
    if agent not in AGENTS:
        raise InstallError(f"unknown agent {agent!r}; expected one of {', '.join(AGENTS)}")


def hook_command(
    agent: str,
    python: str | None = None,
    *,
    hookmain: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
) -> str:
    """The exact shell command the agent runs for every geode hook event.

    ``<abs python> -S <abs hookmain.py> <agent>``: the interpreter is the absolute path of the
    one running the installer (never a bare ``python3`` or a shim that depends on the agent's
    PATH), ``-S`` skips ``site`` (about 4 ms per tool call; hookmain puts its package on
    ``sys.path`` itself). ``GEODE_HOME=``/``GEODE_STORE=`` are prefixed only when the installer
    was given a non-default home or a one-off store, so the usual command stays short and
    identical across machines' defaults. One command serves every event: the hook reads
    ``hook_event_name`` from stdin.
    """
    check_agent(agent)
    interp = python if python is not None else sys.executable
    if not interp:
        raise InstallError("cannot tell which Python is running (sys.executable is empty); pass python=")
    if not os.path.isabs(interp):
        raise InstallError(
            f"the hook's interpreter must be an absolute path, got {interp!r}: the agent's PATH "
            "may find a different Python or none"
        )
    entry = Path(hookmain) if hookmain is not None else default_hookmain()
    entry = Path(os.path.abspath(entry))
    prefix: list[str] = []
    if home is not None:
        home_path = Path(home).expanduser().resolve()
        if home_path != default_home_dir().resolve():
            prefix.append(f"GEODE_HOME={shlex.quote(str(home_path))}")
    if store is not None:
        prefix.append(f"GEODE_STORE={shlex.quote(str(Path(store).expanduser().resolve()))}")
    parts = [shlex.quote(os.path.abspath(interp)), "-S", shlex.quote(str(entry)), agent]
    return " ".join(prefix + parts)


def is_owned_command(command: object) -> bool:
    """True when ``command`` is one of geode's hook commands (any launcher form)."""
    return isinstance(command, str) and OWNED_COMMAND_RE.search(command) is not None


# -- where ---------------------------------------------------------------------------------


def settings_path(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
) -> Path:
    """The config file for ``agent`` at ``scope``.

    Claude Code: ``<project>/.claude/settings.json`` (``settings.local.json`` with ``local``,
    the git-ignored one) or ``<home_dir>/.claude/settings.json``. Codex:
    ``<home_dir>/.codex/hooks.json`` or ``<project>/.codex/hooks.json``. ``home_dir`` is the
    user's home (``~``), a parameter so tests never touch the real one.
    """
    check_agent(agent)
    scope, local = resolve_scope(agent, scope, local)
    scope = scope or DEFAULT_SCOPE[agent]
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")
    if local and (agent != "claude" or scope != "project"):
        raise InstallError("--local exists only for Claude Code at project scope (.claude/settings.local.json)")
    if scope == "user":
        base = Path(home_dir).expanduser() if home_dir is not None else Path.home()
    else:
        base = Path(project) if project is not None else Path.cwd()
    base = Path(os.path.abspath(base))
    if agent == "claude":
        return base / ".claude" / ("settings.local.json" if local else "settings.json")
    return base / ".codex" / "hooks.json"


# -- the surgery ---------------------------------------------------------------------------


def _group(agent: str, spec: EventSpec, command: str) -> dict[str, Any]:
    """One matcher group holding geode's handler, with only keys the agent knows.

    Codex rejects unknown keys, so both emitters write exactly ``matcher`` (when the event
    takes one) and ``hooks: [{type, command, timeout}]``: no ``async``, ``if`` or
    ``statusMessage``.
    """
    handler: dict[str, Any] = {"type": "command", "command": command, "timeout": spec.timeout}
    group: dict[str, Any] = {}
    if spec.matcher is not None:
        group["matcher"] = spec.matcher
    group["hooks"] = [handler]
    return group


def _owned_handler(handler: object) -> bool:
    return isinstance(handler, dict) and is_owned_command(handler.get("command"))


def _strip(hooks: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Remove geode's handlers from every event; return the rest and what was removed.

    Groups we do not understand pass through untouched; a mixed group keeps the user's
    handlers (and its other keys) in order; a group left empty by the strip is dropped, and so
    is an event left with no group because of it. Removed items are ``(event, canonical json
    of group-without-other-handlers)`` so callers can tell a real change from a reinstall.
    """
    out: dict[str, Any] = {}
    removed: list[tuple[str, str]] = []
    for event, groups in hooks.items():
        kept_groups: list[Any] = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(_owned_handler(h) for h in handlers):
                kept_groups.append(group)
                continue
            for h in handlers:
                if _owned_handler(h):
                    shape = {k: v for k, v in group.items() if k != "hooks"}
                    shape["hooks"] = [h]
                    removed.append((event, json.dumps(shape, sort_keys=True)))
            rest = [h for h in handlers if not _owned_handler(h)]
            if rest:
                kept_groups.append({**group, "hooks": rest})
        if kept_groups or not groups:
            out[event] = kept_groups
    return out, removed


def _apply(
    data: dict[str, Any], agent: str, command: str | None
) -> tuple[dict[str, Any], list[tuple[str, str]], list[tuple[str, str]]]:
    """New settings with ours stripped and, when ``command`` is given, appended again."""
    hooks = data.get("hooks") or {}
    stripped, removed = _strip(hooks)
    added: list[tuple[str, str]] = []
    new = dict(data)
    if command is not None:
        for spec in EVENTS[agent]:
            group = _group(agent, spec, command)
            stripped.setdefault(spec.event, []).append(group)
            added.append((spec.event, json.dumps(group, sort_keys=True)))
        new["hooks"] = stripped
    elif removed:
        if stripped:
            new["hooks"] = stripped
        else:
            new.pop("hooks", None)  # only when our strip emptied it
    return new, removed, added


def _diff(removed: list[tuple[str, str]], added: list[tuple[str, str]]) -> tuple[list[str], int]:
    """Events that got a new or changed geode handler, and geode handlers truly removed."""
    pool = list(removed)
    new_events: list[str] = []
    for item in added:
        if item in pool:
            pool.remove(item)
        elif item[0] not in new_events:
            new_events.append(item[0])
    return new_events, len(pool)


# -- the public operations -----------------------------------------------------------------


def resolve_agents(agent: str) -> list[str]:
    """``claude``, ``codex`` or ``all`` -> the agents to act on, in a stable order."""
    if agent == "all":
        return list(AGENTS)
    check_agent(agent)
    return [agent]


def plan(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
    python: str | None = None,
    hookmain: str | os.PathLike[str] | None = None,
    geode_home: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """What :func:`install` would write, for ``--print [--json]``; reads and writes nothing."""
    path = settings_path(agent, scope, project=project, home_dir=home_dir, local=local)
    command = hook_command(agent, python, hookmain=hookmain, home=geode_home, store=store)
    events: dict[str, dict[str, Any]] = {}
    for spec in EVENTS[agent]:
        events[spec.event] = {"matcher": spec.matcher, "command": command, "timeout": spec.timeout}
    return {
        "agent": agent,
        "scope": scope or DEFAULT_SCOPE[agent],
        "path": str(path),
        "events": events,
    }


def install(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
    python: str | None = None,
    hookmain: str | os.PathLike[str] | None = None,
    geode_home: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    verify: bool = True,
) -> dict[str, Any]:
    """Install (or refresh) geode's hooks for ``agent``; idempotent.

    Order matters: parse the file (refuse a malformed one), probe the command (refuse one
    that does not run), and only then write, atomically, and only if the bytes would change,
    so a second install leaves the file byte-identical. Returns ``{"agent", "path", "command",
    "added": [events with a new or changed handler], "removed": <stale geode handlers dropped>,
    "unchanged": <file not written>}`` plus ``"notice"`` for Codex (trust the hooks in /hooks).
    """
    path = settings_path(agent, scope, project=project, home_dir=home_dir, local=local)
    command = hook_command(agent, python, hookmain=hookmain, home=geode_home, store=store)
    loaded = load_config(path)
    new, removed, added = _apply(loaded.data, agent, command)
    if verify:
        verify_command(command)
    content = dump_config(new)
    # The same settings as on disk: leave the file exactly as the user has it (their formatting).
    unchanged = loaded.raw is not None and new == loaded.data
    if not unchanged:
        atomic_write(path, content, loaded.stat)
    new_events, gone = _diff(removed, added)
    result: dict[str, Any] = {
        "agent": agent,
        "path": str(path),
        "command": command,
        "added": new_events,
        "removed": gone,
        "unchanged": unchanged,
    }
    if agent == "codex":
        result["notice"] = CODEX_TRUST_NOTICE
    if resolve_scope(agent, scope, local)[1]:  # Claude Code's local scope: settings.local.json
        from geode.install.gitignore import ignore_local_file

        ignored_in = ignore_local_file(path)
        if ignored_in is not None:
            result["gitignore"] = str(ignored_in)
    return result


def uninstall(
    agent: str,
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    home_dir: str | os.PathLike[str] | None = None,
    local: bool = False,
) -> dict[str, Any]:
    """Remove every geode handler from ``agent``'s file at ``scope``; leave the rest as it was.

    The ``hooks`` key goes only when our removal emptied it; a missing file stays missing.
    Returns ``{"agent", "path", "added": [], "removed": <handlers removed>, "unchanged"}``.
    """
    path = settings_path(agent, scope, project=project, home_dir=home_dir, local=local)
    loaded = load_config(path)
    new, removed, _ = _apply(loaded.data, agent, None)
    unchanged = not removed
    if not unchanged:
        atomic_write(path, dump_config(new), loaded.stat)
    return {"agent": agent, "path": str(path), "added": [], "removed": len(removed), "unchanged": unchanged}
