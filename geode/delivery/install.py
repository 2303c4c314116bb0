"""``geode hooks install|uninstall``: write geode's hook entries into Claude Code and Codex config.

Why this module is careful (see ``/work/shared/HOOKS.md`` sections 3.1 and 4):

* The hook runs before *every* tool call. A command that does not exist is not harmless: the
  original product's installer wrote one, and every tool call failed. So the exact command is
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
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geode.delivery.errors import GeodeError

AGENTS: tuple[str, ...] = ("claude", "codex")
SCOPES: tuple[str, ...] = ("project", "user")

#: Where each agent's hooks go when no scope is named. Claude Code reads project settings
#: without ceremony; Codex loads a project ``.codex/`` layer only once that layer is trusted,
#: so its natural home is the user file ``~/.codex/hooks.json``.
DEFAULT_SCOPE: dict[str, str] = {"claude": "project", "codex": "user"}

#: What the hook is probed with: an event no agent sends, so the hook must do nothing but exit 0.
PROBE_INPUT = '{"hook_event_name":"Probe"}'
PROBE_TIMEOUT_S = 10.0

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


#: Claude Code. Small explicit timeouts: the default is 600 s, and a hung hook would stall the
#: agent that long. Stop/SessionEnd only flush, and SessionEnd's whole budget is short.
CLAUDE_EVENTS: tuple[EventSpec, ...] = (
    EventSpec("PreToolUse", "Bash|Write|Edit|MultiEdit|NotebookEdit|Read|Grep|Glob", 10),
    EventSpec("SessionStart", "startup|resume|clear|compact", 10),
    EventSpec("UserPromptSubmit", None, 10),
    EventSpec("Stop", None, 5),
    EventSpec("SessionEnd", None, 5),
)

#: Codex has no SessionEnd; Stop does the end-of-turn flush there. ``apply_patch`` is Codex's
#: edit tool (also matchable as Edit/Write).
CODEX_EVENTS: tuple[EventSpec, ...] = (
    EventSpec("PreToolUse", "Bash|apply_patch|Edit|Write", 10),
    EventSpec("SessionStart", "startup|resume|clear|compact", 10),
    EventSpec("UserPromptSubmit", None, 10),
    EventSpec("Stop", None, 5),
)

EVENTS: dict[str, tuple[EventSpec, ...]] = {"claude": CLAUDE_EVENTS, "codex": CODEX_EVENTS}


class InstallError(GeodeError):
    """The hooks cannot be installed or removed safely; the message says which file and why."""


# -- the command ---------------------------------------------------------------------------


def default_hookmain() -> Path:
    """The hook's fast entry, next to this file, so the command follows the installed package."""
    return Path(os.path.abspath(Path(__file__).with_name("hookmain.py")))


def _default_home_dir() -> Path:
    return Path("~/.geode").expanduser()


def _check_agent(agent: str) -> None:
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
    _check_agent(agent)
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
        if home_path != _default_home_dir().resolve():
            prefix.append(f"GEODE_HOME={shlex.quote(str(home_path))}")
    if store is not None:
        prefix.append(f"GEODE_STORE={shlex.quote(str(Path(store).expanduser().resolve()))}")
    parts = [shlex.quote(os.path.abspath(interp)), "-S", shlex.quote(str(entry)), agent]
    return " ".join(prefix + parts)


def is_owned_command(command: object) -> bool:
    """True when ``command`` is one of geode's hook commands (any launcher form)."""
    return isinstance(command, str) and OWNED_COMMAND_RE.search(command) is not None


def verify_command(cmd: str, *, timeout: float = PROBE_TIMEOUT_S, cwd: str | None = None) -> None:
    """Run ``cmd`` the way the agent will (``sh -c``) with a probe on stdin; require exit 0.

    Why: a hook command that does not start fails on every tool call. Running it once here is
    the only check that covers a moved interpreter, a missing ``hookmain.py``, a broken import
    or bad quoting. Stdout must also be empty or valid JSON: Codex marks a hook Failed when its
    stdout looks like JSON but does not parse.
    """
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", cmd],
            input=PROBE_INPUT,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        raise InstallError(
            f"hook command did not finish within {timeout:g} s on a probe; not installed: {cmd}"
        ) from exc
    except OSError as exc:
        raise InstallError(f"cannot run /bin/sh to probe the hook command: {exc}") from exc
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout or "").strip().splitlines()
        tail = " | ".join(err[-3:]) if err else "no output"
        raise InstallError(
            f"hook command exited {proc.returncode} on a probe, so it would fail on every tool "
            f"call; not installed.\n  command: {cmd}\n  output: {tail}"
        )
    out = proc.stdout.strip()
    if out[:1] in ("{", "["):
        try:
            json.loads(out)
        except ValueError as exc:
            raise InstallError(
                f"hook command printed invalid JSON on a probe ({exc}); Codex would mark it "
                f"Failed; not installed: {cmd}"
            ) from exc


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
    _check_agent(agent)
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


# -- reading and writing -------------------------------------------------------------------


@dataclass(frozen=True)
class _Loaded:
    data: dict[str, Any]
    raw: bytes | None  # None: the file does not exist
    stat: os.stat_result | None


def _load(path: Path) -> _Loaded:
    """Parse the config file; any doubt about it is an error, never a rewrite."""
    try:
        st = path.stat()  # before reading: a change after this point is caught at write time
        raw = path.read_bytes()
    except FileNotFoundError:
        return _Loaded({}, None, None)
    except OSError as exc:
        raise InstallError(f"{path}: cannot read: {exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InstallError(f"{path}: not UTF-8 ({exc}); left untouched") from exc
    if not text.strip():
        return _Loaded({}, raw, st)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstallError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; "
            "fix it by hand, geode will not rewrite it"
        ) from exc
    if not isinstance(data, dict):
        raise InstallError(
            f"{path}: expected a JSON object at the top level, got {type(data).__name__}; left untouched"
        )
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InstallError(
            f'{path}: "hooks" must be an object of event -> list, got {type(hooks).__name__}; left untouched'
        )
    for event, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            raise InstallError(
                f'{path}: "hooks".{json.dumps(event)} must be a list of matcher groups, '
                f"got {type(groups).__name__}; left untouched"
            )
    return _Loaded(data, raw, st)


def _dump(data: dict[str, Any]) -> bytes:
    """Deterministic text (two-space indent, keys in their order, final newline)."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _atomic_write(path: Path, content: bytes, before: os.stat_result | None) -> None:
    """Replace ``path`` with ``content`` atomically, keeping its mode (and owner when allowed).

    The temp file sits in the same folder (``os.replace`` is atomic only within a filesystem),
    is created with ``O_CREAT|O_EXCL`` at the original mode (never briefly world-readable), and
    is fsynced before the rename; the folder is fsynced after it so the rename survives a crash.
    A symlinked settings file (dotfile managers) is written through, not replaced by a file.
    """
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    if before is not None:
        try:
            now = target.stat()
        except FileNotFoundError:
            now = None
        if now is None or (now.st_mtime_ns, now.st_size, now.st_ino) != (
            before.st_mtime_ns,
            before.st_size,
            before.st_ino,
        ):
            raise InstallError(f"{path}: changed while geode was editing it; nothing written, run again")
    mode = (before.st_mode & 0o7777) if before is not None else None
    tmp = target.with_name(f".{target.name}.geode-{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, mode if mode is not None else 0o666)
    except FileExistsError:  # a stale temp from a crashed run with our pid
        os.unlink(tmp)
        fd = os.open(tmp, flags, mode if mode is not None else 0o666)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # the umask may have narrowed it
                try:
                    os.fchown(fd, before.st_uid, before.st_gid)  # type: ignore[union-attr]
                except OSError:
                    pass  # only root can give a file away; same user is the usual case
            view = memoryview(content)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:  # clean up, then re-raise: nothing is caught here
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


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
    _check_agent(agent)
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
    loaded = _load(path)
    new, removed, added = _apply(loaded.data, agent, command)
    if verify:
        verify_command(command)
    content = _dump(new)
    # The same settings as on disk: leave the file exactly as the user has it (their formatting).
    unchanged = loaded.raw is not None and new == loaded.data
    if not unchanged:
        _atomic_write(path, content, loaded.stat)
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
    loaded = _load(path)
    new, removed, _ = _apply(loaded.data, agent, None)
    unchanged = not removed
    if not unchanged:
        _atomic_write(path, _dump(new), loaded.stat)
    return {"agent": agent, "path": str(path), "added": [], "removed": len(removed), "unchanged": unchanged}


# -- the MCP server: registration for Claude Code and Codex ----------------------------------
#
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

MCP_NAME = "geode"
MCP_STARTUP_TIMEOUT_S = 20
MCP_PROBE_TIMEOUT_S = 60.0
MCP_TOML_MARK = "# geode's recall tools: written by `geode hooks install`, removed by `geode hooks uninstall`"
CLAUDE_MCP_NOTICE = (
    "Claude Code asks once to approve the servers of a project's .mcp.json; `/mcp` in Claude Code shows geode's tools."
)


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
        if home_path != _default_home_dir().resolve():
            env["GEODE_HOME"] = str(home_path)
    if store is not None:
        env["GEODE_STORE"] = str(Path(store).expanduser().resolve())
    out: dict[str, Any] = {"command": os.path.abspath(interp), "args": [str(entry_script)]}
    if env:
        out["env"] = env
    return out


def _agent_entry(agent: str, entry: dict[str, Any]) -> dict[str, Any]:
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
    _check_agent(agent)
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


def _probe_env(entry: dict[str, Any]) -> dict[str, str]:
    """An agent's environment, roughly: no virtual environment, no PYTHONPATH (Codex passes a
    short allow-list), plus the entry's own ``env``."""
    env = {k: os.environ[k] for k in ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TERM") if k in os.environ}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    env.update(entry.get("env") or {})
    return env


def verify_mcp_entry(entry: dict[str, Any], *, timeout: float = MCP_PROBE_TIMEOUT_S) -> dict[str, Any]:
    """Start the server the way the agent will, with ``--check`` (build it, list the tools, exit);
    require exit 0 and the tool list. Why: a registered server that cannot start shows the agent
    no tools at all and says little about why; here the error names the command and its output."""
    argv = [str(entry["command"]), *[str(a) for a in entry.get("args") or []], "--check"]
    try:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, env=_probe_env(entry)
        )
    except subprocess.TimeoutExpired as exc:
        raise InstallError(
            f"the MCP server did not answer --check within {timeout:g} s; not registered: {' '.join(argv)}"
        ) from exc
    except OSError as exc:
        raise InstallError(f"cannot start the MCP server ({exc}); not registered: {' '.join(argv)}") from exc
    tail = " | ".join((proc.stderr or proc.stdout or "").strip().splitlines()[-3:]) or "no output"
    if proc.returncode != 0:
        raise InstallError(
            f"the MCP server exited {proc.returncode} on --check, so the agent would get no tools; "
            f"not registered (use --no-mcp to install the hooks alone).\n  command: {' '.join(argv)}"
            f"\n  output: {tail}"
        )
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise InstallError(f"the MCP server's --check printed no JSON ({tail}); not registered") from exc
    if not isinstance(report, dict) or "search" not in (report.get("tools") or []):
        raise InstallError(
            f"the MCP server's --check lists no search tool ({proc.stdout.strip()[:200]}); not registered"
        )
    return report


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


# -- Codex: config.toml, edited as text and checked by parsing ---------------------------------
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
    want = _agent_entry(agent, mcp_entry(python, script=script, home=geode_home, store=store))
    if agent == "claude":
        text = json.dumps({"mcpServers": {MCP_NAME: want}}, indent=2, ensure_ascii=False)
    else:
        text = _toml_block(want)
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
    want = _agent_entry(agent, entry)
    if agent == "claude":
        loaded = _load(path)
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
            _atomic_write(path, _dump(new), loaded.stat)
    else:
        _old, text, cur, st = _toml_edit(path, want)
        unchanged = text is None
        if not unchanged:
            if verify:
                verify_mcp_entry(entry)
            _atomic_write(path, text.encode("utf-8"), st)
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
        loaded = _load(path)
        new = json.loads(json.dumps(loaded.data))
        servers = _table(new, keys, path, create=False)
        cur = servers.get(MCP_NAME) if servers is not None else None
        if cur is None:
            return result
        if not is_owned_mcp_entry(cur):
            result["kept"] = f"{MCP_NAME!r} is not geode's entry"
            return result
        del servers[MCP_NAME]
        _drop_empty(new, keys)
        if new == {}:
            os.unlink(path)
        else:
            _atomic_write(path, _dump(new), loaded.stat)
    else:
        _old, text, cur, st = _toml_edit(path, None)
        if cur is not None and not is_owned_mcp_entry(cur):
            result["kept"] = f"{MCP_NAME!r} is not geode's entry"
            return result
        if text is None:
            return result
        if not text.strip():
            os.unlink(path)
        else:
            _atomic_write(path, text.encode("utf-8"), st)
    result.update(removed=1, unchanged=False)
    return result
