"""The hook protocols of Claude Code and Codex: read the event on stdin, answer in its JSON.

Principles (docs/DESIGN.md, "Principles"): a hook never blocks or breaks the agent. Any error means exit 0 and
silence (``hookmain`` guarantees it); a deny is deliberate, never a crash. Each agent gets
exactly the keys its protocol knows: Codex rejects unknown keys (``deny_unknown_fields``).
Standard library only, and a lean subset of it (see ``config.py`` on why).

Events handled:
- ``PreToolUse``: the lookup guard, then the act channel (``additionalContext``, or in
  ``act_mode = "deny-once"`` a deny whose reason carries the crystals, the same call let
  through when it comes again);
- ``SessionStart``: the boot channel; ``UserPromptSubmit``: the inject channel;
- ``PostToolUse`` / ``PostToolUseFailure``: a ledger row of each shell command's exit status
  and each edit (``capture``), answered with nothing and without the binding index;
- ``Stop``: names the failed-then-fixed drafts the session kept, or else asks once for a crystal
  when the session did real work and wrote none;
- ``SessionEnd`` (Claude) and ``Stop`` (Codex, which has no SessionEnd): a ``session_end`` row.
"""

from __future__ import annotations

import os
import time

from geode.delivery import guard
from geode.delivery.engine import Delivery, clip_action, content_hash
from geode.delivery.events import HANDLED as HOOK_EVENTS
from geode.delivery.events import RECORD_ONLY
from geode.delivery.index import Index, IndexBuilding, is_busy
from geode.delivery.match import command_words
from geode.kernel import fastjson
from geode.kernel.config import CLAUDE_CONTEXT_CAP, load_settings
from geode.kernel.sqlite import sqlite3

EDIT_TOOLS = ("Edit", "MultiEdit", "NotebookEdit")
WORK_ACTIONS = ("bash", "write", "edit")


def agent_of(data: dict, env: dict) -> str:
    """``main``/``subagent``, with the agent type when one is known (``subagent:Explore``)."""
    cls = "subagent" if data.get("agent_id") else "main"
    kind = data.get("agent_type") or env.get("GEODE_AGENT") or ""
    return f"{cls}:{kind}" if kind else cls


def is_commit(command: str) -> bool:
    for words in command_words(command):
        i = 0
        while i < len(words) and "=" in words[i]:
            i += 1
        if i < len(words) and os.path.basename(words[i]) == "git":
            rest = words[i + 1 :]
            j = 0
            while j < len(rest) and rest[j].startswith("-"):
                j += 2 if rest[j] in ("-C", "-c", "--git-dir", "--work-tree") else 1
            if j < len(rest) and rest[j] == "commit":
                return True
    return False


def action_of(tool: str, tool_input: dict) -> tuple[tuple[str, ...], str, str]:
    """(actions, the text matched against, the file path written or read, if any); a very long
    text is its head and tail (``engine.clip_action``)."""
    actions, text, path = _action_of(tool, tool_input)
    return actions, clip_action(text), path


def _action_of(tool: str, tool_input: dict) -> tuple[tuple[str, ...], str, str]:
    if not isinstance(tool_input, dict):
        tool_input = {}
    if tool in ("Bash", "shell", "exec_command", "local_shell"):
        cmd = tool_input.get("command") or ""
        if isinstance(cmd, list):
            cmd = " ".join(str(c) for c in cmd)
        cmd = clip_action(str(cmd))
        return (("bash", "commit") if is_commit(cmd) else ("bash",)), cmd, ""
    if tool == "Write":
        path = str(tool_input.get("file_path") or "")
        return ("write",), f"{path}\n{tool_input.get('content') or ''}", path
    if tool in EDIT_TOOLS:
        path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
        parts = [path, str(tool_input.get("new_string") or tool_input.get("new_source") or "")]
        for e in tool_input.get("edits") or []:
            if isinstance(e, dict):
                parts.append(str(e.get("new_string") or ""))
        return ("edit",), "\n".join(parts), path
    if tool == "Read":
        path = str(tool_input.get("file_path") or "")
        return ("read",), path, path
    if tool == "apply_patch":  # Codex; the input's shape is not documented: take any text in it
        patch = tool_input.get("command") or tool_input.get("patch") or tool_input.get("input") or ""
        if not isinstance(patch, str):
            patch = fastjson.dumps(patch)
        return (("write",) if "*** Add File:" in patch else ("edit",)), patch, ""
    return (), "", ""


def _cap(text: str) -> str:
    if len(text) <= CLAUDE_CONTEXT_CAP:
        return text
    return text[: CLAUDE_CONTEXT_CAP - 60] + "\n… [geode cut this to fit the 10,000-character hook cap]"


def _context(event: str, text: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": _cap(text)}}


def _deny(reason: str) -> dict:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": _cap(reason),
        }
    }


def _store_path(settings, path: str, cwd: str) -> tuple[str, str] | None:
    if not path:
        return None
    p = path if os.path.isabs(path) else os.path.join(cwd or os.getcwd(), path)
    p = os.path.normpath(p)
    candidates = [p]
    real = os.path.realpath(p)  # the roots are real paths; the agent may write through a symlink
    if real != p:
        candidates.append(real)
    for q in candidates:
        for domain, root in settings.domains.items():
            if q.startswith(root + os.sep):
                return domain, q[len(root) + 1 :].replace(os.sep, "/")
    return None


class HookRun:
    def __init__(self, agent_kind: str, data: dict, env: dict):
        self.kind = agent_kind  # "claude" | "codex"
        self.data = data
        self.env = env
        self.settings = load_settings(env=env)
        self.session = str(data.get("session_id") or "no-session")
        self.cwd = str(data.get("cwd") or os.getcwd())
        self.agent = agent_of(data, env)
        self.idx = Index(self.settings)
        self.d = Delivery(self.settings, self.session, self.agent, self.idx)

    def ready(self) -> None:
        """Bring the index up to date, or raise why it cannot serve this call: ``IndexBuilding``
        (the first build of a large store runs in the background) or a busy ``sqlite3`` error
        (another process held the index past the read budget). A refresh that cannot take the
        write lock is no error: the index is read as it is (``Index.snapshot``)."""
        idx = self.idx
        if not idx.is_built():
            from geode.delivery import index_build

            s = self.settings
            if index_build.running(idx.path) is not None or index_build.more_files_than(s, s.hook_build_files):
                raise IndexBuilding(index_build.start(s, idx.path, self.env))
            idx.build()
        idx.refresh()

    def unserved(self, kind: str, event: str, detail: dict) -> None:
        """The ledger row of a call the index could not serve (``index_busy``, ``index_building``):
        the call delivers nothing, and the evidence can count it rather than never know."""
        self.d.events = [e for e in self.d.events if e["kind"] not in ("delivered", "withheld")]
        action = event
        if event == "PreToolUse":
            actions = action_of(str(self.data.get("tool_name") or ""), self.data.get("tool_input") or {})[0]
            action = ("commit" if "commit" in actions else actions[0]) if actions else "none"
        channel = {"PreToolUse": "act", "SessionStart": "boot", "UserPromptSubmit": "inject"}.get(event, "")
        self.d.record(kind, action, channel, detail=fastjson.dumps({"event": event, **detail}))
        ends = event == "SessionEnd" or (event == "Stop" and self.kind == "codex")
        if ends and not any(e["kind"] == "session_end" for e in self.d.events):
            self.session_end(str(self.data.get("reason") or "stop"))  # the end needs no index

    def close(self) -> None:
        try:
            self.d.flush()
        finally:
            self.d.close()
            self.idx.close()

    # -- PreToolUse ------------------------------------------------------------
    def pre_tool_use(self) -> dict | None:
        tool = str(self.data.get("tool_name") or "")
        tool_input = self.data.get("tool_input") or {}
        s = self.settings
        if s.block_lookups:
            verdict = self._lookup(tool, tool_input)
            if verdict is not None:
                return verdict
        actions, text, path = action_of(tool, tool_input)
        if not actions:
            return None
        self._count(actions[0], text)
        if path and actions[0] in ("write", "edit"):
            hit = _store_path(s, path, self.cwd)
            if hit:
                self.idx.mark_dirty(*hit)
                self.idx.sess_put(self.session, "store_write", [f"{hit[0]}:{hit[1]}"])
        label = "commit" if "commit" in actions else actions[0]
        if s.act_mode == "deny-once":
            key = content_hash(f"{tool}\0{text}")[:24]
            if key in self.idx.sess_get(self.session, "denied"):
                return None  # the crystals went out with the deny; let the same call through
            res = self.d.act(actions, text, label, path, self.cwd)
            if not res["text"]:
                return None
            self.idx.sess_put(self.session, "denied", [key])
            self.d.record("denied_once", label, "act", detail=key)
            return _deny(
                res["text"] + "\ngeode held this call once so that the notes above are read before it runs. "
                "Nothing is wrong with the call: run it again unchanged and it goes through."
            )
        res = self.d.act(actions, text, label, path, self.cwd)
        if not res["text"]:
            return None
        return _context("PreToolUse", res["text"])

    def _lookup(self, tool: str, tool_input) -> dict | None:
        s = self.settings
        if not isinstance(tool_input, dict):
            return None
        if tool in ("Bash", "shell", "exec_command", "local_shell"):
            cmd = clip_action(str(tool_input.get("command") or ""))
            hit = guard.bash_lookup(cmd, s.domains, self.cwd)
            if hit is None:
                return None
            domain, what = hit
            marked = s.lookup_marker in cmd
        else:
            hit = guard.tool_lookup(tool, tool_input, s.domains, self.cwd)
            if hit is None:
                return None
            domain, what = hit
            marked = False
            if tool == "Read":
                fp = os.path.normpath(os.path.join(self.cwd, str(tool_input.get("file_path") or "")))
                if fp in self.idx.sess_get(self.session, "offered"):
                    # the full note geode itself pointed to after cutting it (act or boot): the
                    # agent following geode's pointer, a follow-up of a delivery, never a lookup
                    followed = {"tool": tool, "what": what, "input": {"file_path": fp[:300]}}
                    self.d.record("followed_up", what, "guard", detail=fastjson.dumps(followed), domain=domain)
                    return None
        # what was hunted, so the Gardener can propose a crystal bound to it (bounded: a row is not a log)
        info: dict[str, object] = {"tool": tool, "what": what}
        if tool in ("Bash", "shell", "exec_command", "local_shell"):
            info["command"] = str(tool_input.get("command") or "")[:500]
        else:
            info["input"] = {
                k: str(tool_input[k])[:300] for k in ("file_path", "pattern", "path", "glob") if tool_input.get(k)
            }
        detail = fastjson.dumps(info)
        if marked:
            self.d.record("lookup_marked", what, "guard", detail=detail, domain=domain)
            return None
        self.d.record("blocked", what, "guard", detail=detail, domain=domain)
        return _deny(guard.deny_message(domain, s.domains[domain], what, s.lookup_marker, tool=tool))

    def _count(self, action: str, text: str) -> None:
        try:
            if not self.idx.sess_get(self.session, "start"):
                self.idx.sess_put(self.session, "start", ["t"])
            self.idx.sess_put(self.session, "actions", [action], bump=True)
            if action == "bash":
                words = command_words(text)
                if words and words[0]:  # the command and its subcommand: "git commit", "npm test", "pytest"
                    head = [os.path.basename(words[0][0])]
                    sub = words[0][1] if len(words[0]) > 1 else ""
                    if sub and sub[0].isalpha() and all(c.isalnum() or c in "-:" for c in sub):
                        head.append(sub)
                    self.idx.sess_put(self.session, "cmd", [" ".join(head)[:60]], bump=True)
        except sqlite3.Error:
            pass  # session counts are best effort (the index locked); a bug still reaches hookmain's log

    # -- the other events ----------------------------------------------------------
    def session_start(self) -> dict | None:
        res = self.d.boot()
        return _context("SessionStart", res["text"]) if res["text"] else None

    def prompt(self) -> dict | None:
        prompt = str(self.data.get("prompt") or "")
        res = self.d.inject(prompt)
        text = res["text"] or ""
        try:  # prompt-time recall: at most three notes, within its own budget; never blocks the prompt
            from geode.delivery import prompt_recall

            budget = self.settings.recall.budget_ms  # GEODE_RECALL_BUDGET_MS, [recall] budget_ms, 300
            hits, how = prompt_recall.recall(self.settings, prompt, budget_ms=budget)
            found = prompt_recall.render(hits, how, cap=max(0, CLAUDE_CONTEXT_CAP - 200 - len(text)))
            if found:
                text = f"{text}\n{found}" if text else found
                from geode.delivery.search_log import record_search  # the Gardener reads these rows

                record_search(self.settings, prompt, hits, self.session)
        # recall is a bonus: a bad GEODE_RECALL_BUDGET_MS, a socket or database that fails, leave the
        # inject channel as it was (prompt_recall handles its own errors; a bug reaches hookmain's log)
        except (ValueError, OSError, sqlite3.Error):
            pass
        return _context("UserPromptSubmit", text) if text else None

    def session_end(self, reason: str) -> None:
        self.d.record("session_end", "session", "", detail=fastjson.dumps({"reason": reason, "agent": self.kind}))

    def stop(self) -> dict | None:
        if self.kind == "codex":
            self.session_end("stop")
        if self.data.get("stop_hook_active"):
            return None  # we (or another hook) already made it continue once: never loop
        sess = self.idx.sess_get
        if sess(self.session, "stop_blocked"):
            return None
        from geode.delivery import capture

        kept = capture.kept_pairs(self.settings, self.session)
        if kept:  # the one interruption names the drafts: failed, then fixed (docs/CAPTURE.md)
            self.idx.sess_put(self.session, "stop_blocked", ["1"])
            names = [capture.draft_name(p) for p in kept]
            self.d.record("stop_blocked", "stop", "", detail=fastjson.dumps({"drafts": names}))
            return {"decision": "block", "reason": capture.stop_message(kept)}
        counts = sess(self.session, "actions")
        work = sum(n for a, (_ts, n) in counts.items() if a in WORK_ACTIONS)
        if work < self.settings.stop_min_actions:
            return None
        if sess(self.session, "store_write"):
            return None
        start = sess(self.session, "start").get("t", (time.time(), 0))[0]
        newer = self.idx.conn.execute("SELECT COUNT(*) FROM files WHERE mtime_ns > ?", (int(start * 1e9),)).fetchone()[
            0
        ]
        if newer:
            return None
        self.idx.sess_put(self.session, "stop_blocked", ["1"])
        self.d.record("stop_blocked", "stop", "", detail=fastjson.dumps({"actions": work}))
        return {"decision": "block", "reason": self._template(work, counts)}

    def _suggested_terms(self, action: str, limit: int = 3) -> list[str]:
        """The session's most frequent commands (first two words), keeping only terms that
        ``geode lint`` would pass: not a bare common word, not too short, able to match."""
        from geode.delivery.match import COMMON_SHELL_WORDS, term_problems

        cmds = sorted(self.idx.sess_get(self.session, "cmd").items(), key=lambda kv: (-kv[1][1], kv[0]))
        out: list[str] = []
        for cmd, _v in cmds:
            term = cmd.strip().lower()
            if not term or "," in term or term.split()[0] in ("cd", "ls", "pwd", "cat", "echo"):
                continue
            if any(sev != "info" for _c, sev, _m in term_problems(term, "bash")):
                continue
            if term.split()[0] in COMMON_SHELL_WORDS and len(term.split()) < 2:
                continue
            out.append(term)
            if len(out) == limit:
                break
        return out

    def _template(self, work: int, counts: dict) -> str:
        s = self.settings
        root = s.domains[s.default_domain]
        top_action = max((a for a in counts if a in WORK_ACTIONS), key=lambda a: counts[a][1], default="bash")
        terms = (
            ", ".join(self._suggested_terms(top_action)) or "<the part of a command this is about, e.g. npm run build>"
        )
        today = time.strftime("%Y-%m-%d")
        return (
            f"geode: this session did real work ({work} shell commands and edits) and wrote nothing into the "
            f"memory store ({root}). If it taught something worth having next time (an error you paid for, a fact "
            "you had to look up, a decision), save it as a crystal in that folder; if not, say so and stop. "
            "A filled-in start, to complete or discard (geode writes nothing itself):\n\n"
            "---\nname: <short-kebab-case-name>\ndescription: <one line: what looks like success but is not, or what is true>\n"
            f"type: feedback\nlast_verified: {today}\ntrigger: <when this applies>\ncrystal:\n  deliver: act\n"
            f'  on: {top_action}\n  match: "{terms}"\n  who: all\n---\n<!-- crystal:essence -->\n'
            "<the knowing, under 1,500 characters: the trap, how to tell, what to do instead>\n<!-- /crystal:essence -->\n\n"
            f"## Where this came from\nSession {self.session}, {today}: <the command, error or commit that taught it>.\n"
        )


def run(agent_kind: str, raw: str, env: dict | None = None) -> tuple[int, str]:
    """Handle one hook call; returns (exit code, stdout). Raises on internal errors (hookmain
    turns every exception into exit 0 and silence)."""
    env = dict(os.environ) if env is None else env
    data = fastjson.loads(raw) if raw.strip() else {}
    if not isinstance(data, dict):
        return 0, ""
    event = str(data.get("hook_event_name") or "")
    if event == "Probe":
        return 0, ""  # the installer's check that this command runs; the imports above succeeded
    if event not in HOOK_EVENTS:
        return 0, ""
    if event in RECORD_ONLY:
        return _record_only(agent_kind, event, data, env)
    h = HookRun(agent_kind, data, env)
    out = None
    try:
        try:
            h.ready()
            out = _dispatch(h, event, data)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            h.unserved("index_busy", event, {"error": str(exc)[:200], "read_ms": h.idx.read_ms})
        except IndexBuilding as exc:
            h.unserved("index_building", event, exc.state)
    finally:
        h.close()
    return 0, fastjson.dumps(out) if out else ""


def _record_only(agent_kind: str, event: str, data: dict, env: dict) -> tuple[int, str]:
    """PostToolUse / PostToolUseFailure: one ledger row of what the tool did, and no answer. No
    binding index, no store walk: settings (the cached copy) and one write."""
    from geode.delivery import capture, ledger

    settings = load_settings(env=env)
    rows = capture.observe(event, data, str(data.get("session_id") or "no-session"), agent_of(data, env))
    if rows:
        ledger.append(settings, rows)
    return 0, ""


def _dispatch(h: HookRun, event: str, data: dict) -> dict | None:
    if event == "PreToolUse":
        return h.pre_tool_use()
    if event == "SessionStart":
        return h.session_start()
    if event == "UserPromptSubmit":
        return h.prompt()
    if event == "Stop":
        return h.stop()
    if event == "SessionEnd":
        h.session_end(str(data.get("reason") or ""))
    return None
