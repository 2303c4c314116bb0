"""The installer's probes: the hook command and the MCP server, each run once the way the agent
will run it, before anything is written.

Apart because a probe starts a process and judges its output: a hook command that does not start
fails on every tool call, and a registered server that cannot start shows the agent no tools at
all; both are refused here with the command and its output named. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from geode.install.files import InstallError

#: What the hook is probed with: an event no agent sends, so the hook must do nothing but exit 0.
PROBE_INPUT = '{"hook_event_name":"Probe"}'
PROBE_TIMEOUT_S = 10.0
MCP_PROBE_TIMEOUT_S = 60.0


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
