"""A small builder for the delivery tests: a temp GEODE_HOME with a store, crystals written
into it, the real hook command run as a subprocess, and the ledger read back.

Everything lives under pytest's ``tmp_path``; ``GEODE_HOME`` is always set, so ``~/.geode``
is never touched. The hook is run exactly as an agent runs it: the command string from
``geode.install.hooks.hook_command`` through ``/bin/sh -c``, the event JSON on stdin.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from geode.install.hooks import hook_command
from tests.stores import NO_BACKGROUND_BUILD, write

REPO = Path(__file__).resolve().parents[1]
ESSENCE_OPEN = "<!-- crystal:essence -->"
ESSENCE_CLOSE = "<!-- /crystal:essence -->"


def crystal_text(
    essence: str | None,
    *,
    name: str | None = None,
    deliver: str | None = "act",
    on: str | None = "bash",
    match: str | None = None,
    who: str | None = None,
    extra: str = "",
    body: str = "",
    salience: float | None = None,
) -> str:
    """A crystal file. ``match`` is written verbatim after ``match: `` (quote it yourself)."""
    fm = []
    if name is not None:
        fm.append(f"name: {name}")
    if salience is not None:
        fm.append(f"salience: {salience}")
    if extra:
        fm.append(extra.rstrip("\n"))
    crystal = []
    if deliver is not None:
        crystal.append(f"  deliver: {deliver}")
    if on is not None:
        crystal.append(f"  on: {on}")
    if match is not None:
        crystal.append(f"  match: {match}")
    if who is not None:
        crystal.append(f"  who: {who}")
    if crystal:
        fm.append("crystal:")
        fm.extend(crystal)
    text = "---\n" + "\n".join(fm) + "\n---\n"
    if essence is not None:
        text += f"{ESSENCE_OPEN}\n{essence}\n{ESSENCE_CLOSE}\n"
    text += "\n## Where this came from\nA test.\n" + body
    return text


class HookResult:
    def __init__(self, proc: subprocess.CompletedProcess, errors: str):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.errors = errors  # new text in GEODE_HOME/hook-errors.log from this call

    @property
    def json(self) -> dict:
        assert self.stdout, f"empty stdout (rc={self.rc}); hook errors: {self.errors!r}; stderr: {self.stderr!r}"
        return json.loads(self.stdout)

    @property
    def context(self) -> str:
        return self.json["hookSpecificOutput"]["additionalContext"]

    def __repr__(self) -> str:
        return f"HookResult(rc={self.rc}, stdout={self.stdout[:300]!r}, errors={self.errors[-800:]!r})"


class Geode:
    """A GEODE_HOME under ``tmp_path`` with the default store ``home/store`` (domain ``main``)."""

    def __init__(self, tmp_path: Path, config: str | None = None, store: bool = True):
        self.tmp = Path(tmp_path)
        self.home = self.tmp / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.store = (self.home / "store").resolve() if store else None
        if store:
            self.store.mkdir(exist_ok=True)
        self.cwd = self.tmp / "project"
        self.cwd.mkdir(exist_ok=True)
        if config is not None:
            self.config(config)

    # -- files --------------------------------------------------------------------
    def config(self, text: str) -> None:
        (self.home / "geode.toml").write_text(text)

    def write(self, rel: str, text: str | bytes) -> Path:
        return write(self.store, rel, text, mode=None)  # the mode the umask gives, as an editor's

    def crystal(self, rel: str, essence: str | None, **kw) -> Path:
        return self.write(rel, crystal_text(essence, **kw))

    # -- settings and records ---------------------------------------------------------
    def env(self, withhold: str | None = "0", **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
        env["GEODE_HOME"] = str(self.home)
        if withhold is not None:
            env["GEODE_WITHHOLD_RATE"] = withhold
        env.update(extra)
        return env

    def settings(self, withhold: str | None = "0"):
        from geode.kernel.config import load_settings

        return load_settings(env=self.env(withhold))

    def init_db(self, withhold: str | None = "0") -> None:
        from geode.records.models import init_db

        init_db(self.settings(withhold)).dispose()

    def rows(self, kind: str | None = None, session: str | None = None) -> list[dict]:
        db = self.home / "geode.db"
        assert db.exists(), "geode.db was not created (call init_db first)"
        conn = sqlite3.connect(db)
        conn.row_factory = sqlite3.Row
        try:
            sql = "SELECT * FROM ledger_event WHERE 1=1"
            args: list = []
            if kind is not None:
                sql += " AND kind = ?"
                args.append(kind)
            if session is not None:
                sql += " AND session = ?"
                args.append(session)
            return [dict(r) for r in conn.execute(sql + " ORDER BY id", args)]
        finally:
            conn.close()

    def error_log(self) -> str:
        p = self.home / "hook-errors.log"
        try:
            return p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    # -- the hook -----------------------------------------------------------------------
    def command(self, agent: str = "claude", flags: str = "") -> str:
        cmd = hook_command(agent, home=self.home)
        if flags:
            cmd = cmd.replace(" -S ", f" -S {flags} ", 1)
        return cmd

    def run_raw(
        self,
        stdin: str,
        agent: str = "claude",
        withhold: str | None = "0",
        flags: str = "",
        timeout: float = 30,
        env_extra: dict | None = None,
        command: str | None = None,
    ) -> HookResult:
        before = self.error_log()
        env = self.env(withhold, **(env_extra or {}))
        proc = subprocess.run(
            ["/bin/sh", "-c", command or self.command(agent, flags)],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.cwd,
            timeout=timeout,
        )
        after = self.error_log()
        return HookResult(proc, after[len(before) :] if after.startswith(before) else after)

    def event(self, event: str, session: str = "s1", agent: str = "claude", **fields) -> dict:
        data = {
            "session_id": session,
            "transcript_path": None if agent == "codex" else "/tmp/t.jsonl",
            "cwd": str(self.cwd),
            "hook_event_name": event,
        }
        if agent == "codex":
            data["model"] = "gpt-5"
            if event != "SessionStart":
                data["turn_id"] = "turn-1"
        data.update(fields)
        return data

    def run(
        self,
        event: str,
        session: str = "s1",
        agent: str = "claude",
        withhold: str | None = "0",
        flags: str = "",
        timeout: float = 30,
        env_extra: dict | None = None,
        **fields,
    ) -> HookResult:
        payload = self.event(event, session, agent, **fields)
        return self.run_raw(json.dumps(payload), agent, withhold, flags, timeout, env_extra)

    def tool(self, tool: str, tool_input: dict, session: str = "s1", agent: str = "claude", **kw) -> HookResult:
        return self.run(
            "PreToolUse", session, agent, tool_name=tool, tool_input=tool_input, tool_use_id="toolu_1", **kw
        )

    def bash(self, command: str, session: str = "s1", agent: str = "claude", **kw) -> HookResult:
        return self.tool("Bash", {"command": command, "description": "x"}, session, agent, **kw)


def python() -> str:
    return sys.executable
