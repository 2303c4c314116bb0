"""Failed, then fixed: what the PostToolUse hook records of each shell command, and the pairs.

Why in the delivery room: the hook writes these rows on every shell command and every edit, so
this module is on the hook's path and uses the standard library only (no ``re``, no ``json``
import on the write path). What it records goes into the usage ledger (``geode.db``), never into
the store: a ``shell_run`` row per shell command (its shape, its exit status and, when it failed,
the first lines of its error, raw) and a ``file_touched`` row per Write/Edit. Redaction of
secrets needs a maintained detector (detect-secrets), which is not standard library, so it
happens off this path, when the Gardener builds a draft (``geode.gardener.capture``); the raw
lines stay in the local ledger only, and the Gardener blanks them after ``RETENTION_DAYS``.

A *pair* (``pairs``) is a failing command followed in the same session by a variant that
succeeds: the same command word and subcommand with other flags or arguments, or the same
command again after a Write/Edit of a file its error named. The Stop hook only counts and names
pairs (``stop_message``); the Gardener turns them into drafts in the approval queue.
"""

from __future__ import annotations

import os

from geode.delivery import ledger
from geode.delivery.match import command_words
from geode.kernel import fastjson
from geode.kernel.sqlite import sqlite3

SHELL_TOOLS = ("Bash", "shell", "exec_command", "local_shell")
TOUCH_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch")
#: kinds of the rows this module writes (``ledger.KINDS`` lists them too)
RUN_KIND = "shell_run"
TOUCH_KIND = "file_touched"
#: how many lines of a failing command's output are kept, and how long each may be
ERROR_LINES = 8
LINE_CHARS = 200
#: raw error lines stay in the local ledger this many days; the Gardener blanks older ones
RETENTION_DAYS = 14
#: words that only set up the command that matters (``cd app && npm test``)
_SETUP_WORDS = frozenset({"cd", "export", "source", ".", "set", "pushd", "popd", "true"})
_WRAPPERS = frozenset({"sudo", "env", "nice", "nohup", "time", "timeout", "npx", "command", "exec"})


def shape(command: str) -> dict:
    """The command's shape: ``word`` (basename), ``sub`` (the subcommand, if the second word is a
    name), ``flags`` and ``args``, of the first simple command that is not set-up (``cd``...)."""
    try:
        segments = command_words(command)
    except ValueError:  # an unclosed quote: the words as spaces split them
        segments = [command.split()]
    for words in segments:
        i = 0
        while i < len(words) and ("=" in words[i] and not words[i].startswith("-")):
            i += 1  # FOO=1 npm test
        while i < len(words) and os.path.basename(words[i]) in _WRAPPERS:
            i += 1
        if i >= len(words) or os.path.basename(words[i]) in _SETUP_WORDS:
            continue
        word = os.path.basename(words[i])
        rest = words[i + 1 :]
        sub = ""
        if rest and rest[0][:1].isalpha() and all(c.isalnum() or c in "-:_." for c in rest[0]):
            sub, rest = rest[0], rest[1:]
        flags = [w for w in rest if w.startswith("-") and w != "--"]
        args = [w for w in rest if not w.startswith("-")]
        return {"word": word, "sub": sub, "flags": flags[:20], "args": [a[:200] for a in args[:20]]}
    return {"word": "", "sub": "", "flags": [], "args": []}


def _exit_from_text(text: str) -> int | None:
    """``Exit code 1`` / ``exit code: 2`` / ``exited with code 3`` in an error text, if present."""
    low = text.lower()
    for marker in ("exit code:", "exit code", "exit status", "exited with code", "status code"):
        i = low.find(marker)
        if i < 0:
            continue
        j = i + len(marker)
        while j < len(low) and low[j] in " :=":
            j += 1
        k = j
        while k < len(low) and low[k].isdigit():
            k += 1
        if k > j:
            return int(low[j:k])
    return None


def exit_status(event: str, data: dict) -> int | None:
    """The shell command's exit status, as far as the agent said it.

    Claude Code calls ``PostToolUseFailure`` (with ``error``, e.g. ``"Exit code 1\\n..."``) for a
    command that failed and ``PostToolUse`` (``tool_response``: ``stdout``, ``stderr``,
    ``interrupted``) for one that did not. Codex sends ``PostToolUse`` with a ``tool_response``
    whose shape is not documented: an ``exit_code``-like key, or ``Exit code: N`` in its text, is
    read; without either the command counts as a success. None: interrupted (no status)."""
    if event == "PostToolUseFailure":
        if data.get("is_interrupt"):
            return None
        code = _exit_from_text(str(data.get("error") or ""))
        return 1 if code is None or code == 0 else code
    resp = data.get("tool_response")
    if isinstance(resp, dict):
        if resp.get("interrupted"):
            return None
        for key in ("exit_code", "exitCode", "returncode", "return_code", "status"):
            v = resp.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        for key in ("output", "formatted_output", "aggregated_output", "stderr"):
            v = resp.get(key)
            if isinstance(v, str) and v[:200].lower().lstrip().startswith("exit code"):
                code = _exit_from_text(v[:200])
                if code is not None:
                    return code
        return 0
    if isinstance(resp, str) and resp[:200].lower().lstrip().startswith("exit code"):
        code = _exit_from_text(resp[:200])
        if code is not None:
            return code
    return 0


def error_lines(event: str, data: dict) -> list[str]:
    """The first non-empty lines of a failing command's output (raw: redacted off the hook)."""
    resp = data.get("tool_response")
    texts: list[str] = []
    if event == "PostToolUseFailure":
        texts.append(str(data.get("error") or ""))
    elif isinstance(resp, dict):
        texts += [str(resp.get(k) or "") for k in ("stderr", "output", "aggregated_output", "stdout")]
    elif isinstance(resp, str):
        texts.append(resp)
    out: list[str] = []
    for text in texts:
        for line in text[:20000].splitlines():
            line = line.strip()
            if line and not (
                event == "PostToolUseFailure"
                and not out
                and _exit_from_text(line) is not None
                and line.lower().startswith("exit code")
            ):
                out.append(line[:LINE_CHARS])
                if len(out) == ERROR_LINES:
                    return out
    return out


def observe(event: str, data: dict, session: str, agent: str) -> list[dict]:
    """The ledger rows of one PostToolUse/PostToolUseFailure call (none for other tools)."""
    tool = str(data.get("tool_name") or "")
    tool_input = data.get("tool_input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    if tool in SHELL_TOOLS:
        cmd = tool_input.get("command") or ""
        if isinstance(cmd, list):
            cmd = " ".join(str(c) for c in cmd)
        cmd = str(cmd)
        if not cmd.strip():
            return []
        code = exit_status(event, data)
        detail: dict[str, object] = {"command": cmd[:1000], "exit": code, "cwd": str(data.get("cwd") or "")[:300]}
        detail.update(shape(cmd))
        if code:
            detail["error"] = error_lines(event, data)
        return [ledger.new_event(RUN_KIND, session=session, action="bash", agent=agent, detail=fastjson.dumps(detail))]
    if tool in TOUCH_TOOLS:
        path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
        if not path and tool == "apply_patch":
            patch = str(tool_input.get("command") or tool_input.get("patch") or tool_input.get("input") or "")
            for line in patch.splitlines():
                for mark in ("*** Update File:", "*** Add File:"):
                    if line.startswith(mark):
                        path = line[len(mark) :].strip()
                        break
                if path:
                    break
        if not path:
            return []
        if not os.path.isabs(path):
            path = os.path.join(str(data.get("cwd") or ""), path)
        return [
            ledger.new_event(TOUCH_KIND, session=session, action="edit", agent=agent, path=os.path.normpath(path)[:500])
        ]
    return []


# -- pairs -------------------------------------------------------------------------------------


def named_files(lines: list[str]) -> set[str]:
    """Base names of the files an error's lines name (``src/app.test.js:12:5`` -> ``app.test.js``)."""
    out: set[str] = set()
    for line in lines:
        for raw in line.replace("(", " ").replace(")", " ").replace("'", " ").replace('"', " ").split():
            word = raw.strip(",;:")
            while word and (word[-1].isdigit() or word[-1] == ":"):
                word = word[:-1]  # file.js:12:5
            base = os.path.basename(word)
            stem, dot, ext = base.rpartition(".")
            if dot and stem and ext and ext.isalnum() and not ext.isdigit() and len(ext) <= 5:
                out.add(base)
    return out


def _head(d: dict) -> tuple[str, str]:
    return str(d.get("word") or ""), str(d.get("sub") or "")


def pairs(rows: list[tuple[int | None, float, str, str, str]]) -> list[dict]:
    """The failed-then-fixed pairs among one session's rows ``(id, ts, kind, path, detail)``, in order.

    For each command head (word, subcommand) the latest failure is open until a success of the
    same head: a success with another command line closes it as a pair; the same command line
    again is a pair only when a file its error named was touched in between (else it was a
    flaky run, not a fix). "In between" is by the rows' order, not their ids: a row still in
    the spool has no id yet (``None``), and one drained late has an id past rows written after it."""
    open_fail: dict[tuple[str, str], tuple[int | None, dict, float, int]] = {}
    touched: list[tuple[int, str]] = []
    out: list[dict] = []
    for pos, (rid, ts, kind, path, detail) in enumerate(rows):
        if kind == TOUCH_KIND:
            touched.append((pos, path))
            continue
        if kind != RUN_KIND:
            continue
        try:
            d = fastjson.loads(detail or "{}")
        except ValueError:
            continue
        if not isinstance(d, dict) or not d.get("word"):
            continue
        head = _head(d)
        code = d.get("exit")
        if code is None:
            continue
        if code != 0:
            open_fail[head] = (rid, d, ts, pos)
            continue
        if head not in open_fail:
            continue
        fid, fd, fts, fpos = open_fail.pop(head)
        between = list(dict.fromkeys(p for tpos, p in touched if fpos < tpos < pos))
        same = str(fd.get("command") or "").strip() == str(d.get("command") or "").strip()
        if same:
            named = named_files([str(x) for x in fd.get("error") or []])
            if not any(os.path.basename(p) in named for p in between):
                continue
        out.append(
            {
                "fail_id": fid,
                "fix_id": rid,
                "fail_ts": fts,
                "fix_ts": ts,
                "fail": fd,
                "fix": d,
                "touched": between,
                "how": "same command after a fix to a file its error named" if same else "a variant of the command",
            }
        )
    return out


def _flag(w: str) -> str:
    return w.split("=", 1)[0]  # --token=VALUE: the value may be a secret, the flag is not


def draft_name(pair: dict) -> str:
    """The name a pair's draft goes under: stable, so the Stop hook and the Gardener agree. Made of
    the command word, subcommand and a flag only (an argument may hold a secret: redaction is
    not standard library, so it never reaches a name or the Stop message). A pair whose failing
    row is still in the spool has no row id yet: its name lacks the number the Gardener adds."""
    fail, fix = pair["fail"], pair["fix"]
    words = [fail.get("word") or "cmd", fail.get("sub") or ""]
    fflags = [_flag(w) for w in fail.get("flags") or []]
    xflags = [_flag(w) for w in fix.get("flags") or []]
    words += [w for w in xflags if w not in fflags][:1] or [w for w in fflags if w not in xflags][:1]
    slug = "-".join("".join(c if c.isalnum() else "-" for c in w.lower()).strip("-") for w in words if w)
    while "--" in slug:
        slug = slug.replace("--", "-")
    if pair["fail_id"] is None:  # still in the spool: the number comes with its ledger row
        return f"failed-{slug.strip('-')[:60]}"
    return f"failed-{slug.strip('-')[:60]}-{pair['fail_id']}"


def session_rows(settings, session: str) -> list[tuple[int | None, float, str, str, str]]:
    """This session's ``shell_run`` and ``file_touched`` rows ``(id, ts, kind, path, detail)``,
    in time order: the SQLite ledger's and those still in the spool (``id`` None), each once.

    The spool is read first: a row drained between the two reads is then in the ledger, and the
    ledger's copy (with its id) is kept; read the other way round it would be in neither."""
    spooled = spool_rows(settings, session)
    stored = _ledger_rows(settings, session)
    known = {r[0] for r in stored}
    rows: list[tuple[int | None, float, str, str, str]] = [(rid, ts, k, p, d) for _e, rid, ts, k, p, d in stored]
    rows += [(None, ts, k, p, d) for eid, ts, k, p, d in spooled if eid not in known]
    rows.sort(key=lambda r: r[1])  # stable: rows of one time keep the ledger's id order
    return rows


def _ledger_rows(settings, session: str) -> list[tuple[str, int, float, str, str, str]]:
    """``(event_id, id, ts, kind, path, detail)`` of the session's rows in the SQLite ledger (none
    when it is PostgreSQL, which the hook never opens: its rows are all in the spool)."""
    path = settings.records_file
    if path is None or not os.path.exists(path):
        return []
    conn = ledger.connect(settings)
    try:
        return [
            (str(r[0]), int(r[1]), float(r[2]), str(r[3]), str(r[4] or ""), str(r[5] or ""))
            for r in conn.execute(
                f"SELECT event_id, id, ts, kind, path, detail FROM {ledger.TABLE} WHERE session = ? "
                "AND kind IN (?, ?) ORDER BY ts, id",
                (session, RUN_KIND, TOUCH_KIND),
            )
        ]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # not migrated yet: every row is in the spool
        raise
    finally:
        conn.close()


#: the Stop hook reads at most this much of each spool file, from its end (this session's rows
#: are the latest; a PostgreSQL home spools every row until a command drains it)
SPOOL_TAIL_BYTES = 16 << 20
_SPOOL_KINDS = (f'"{RUN_KIND}"'.encode(), f'"{TOUCH_KIND}"'.encode())


def spool_rows(settings, session: str) -> list[tuple[str, float, str, str, str]]:
    """``(event_id, ts, kind, path, detail)`` of the session's ``shell_run`` and ``file_touched``
    rows still in the spool (``spool/events.jsonl`` and the ``*.draining`` files of a drain in
    progress), read without a lock and without changing a byte: a line being written is torn and
    skipped, a file drained meanwhile is gone and its rows are in the ledger."""
    spool_dir = str(settings.spool_dir)
    try:
        names = sorted(os.listdir(spool_dir))
    except OSError:
        return []
    needle = fastjson.dumps(session).encode("ascii", "replace")  # as the spool writes it (``ledger.encode_line``)
    out: list[tuple[str, float, str, str, str]] = []
    for name in names:
        if name != ledger.SPOOL_NAME and not (name.startswith("events.") and name.endswith(".draining")):
            continue
        try:
            with open(os.path.join(spool_dir, name), "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size > SPOOL_TAIL_BYTES:
                    fh.seek(size - SPOOL_TAIL_BYTES)
                    fh.readline()  # the line cut by the seek
                data = fh.read()
        except OSError:
            continue
        # only the lines that name this session are parsed (found by ``bytes.find``, not a Python
        # loop over every line: a PostgreSQL home's spool holds every session's rows)
        pos = data.find(needle)
        while pos != -1:
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            if end == -1:
                break  # a line still being written: torn
            raw = data[start : end + 1]
            pos = data.find(needle, end + 1)
            if not (_SPOOL_KINDS[0] in raw or _SPOOL_KINDS[1] in raw):
                continue
            try:
                ev = fastjson.loads(raw.decode("utf-8"))
            except ValueError:  # a torn or malformed line: the drain moves it to rejected.jsonl
                continue
            if not isinstance(ev, dict) or ev.get("session") != session or ev.get("kind") not in (RUN_KIND, TOUCH_KIND):
                continue
            try:
                out.append(
                    (
                        str(ev["event_id"]),
                        float(ev["ts"]),
                        str(ev["kind"]),
                        str(ev.get("path") or ""),
                        str(ev.get("detail") or ""),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
    return out


def _cmd(d: dict) -> str:
    """A command as its shape: word, subcommand, flags (values cut), and how many arguments."""
    words = [str(d.get("word") or ""), str(d.get("sub") or "")] + [_flag(str(w)) for w in d.get("flags") or []]
    n = len(d.get("args") or [])
    shown = " ".join(w for w in words if w)
    return shown + (f" [{n} argument{'s' if n != 1 else ''}]" if n else "")


def stop_message(found: list[dict]) -> str:
    """The Stop hook's one interruption when the session kept pairs: names each draft and how to
    finish it. Nothing here is filed: ``geode drafts`` (or tonight's upkeep) files them."""
    lines = [
        f"geode: this session failed and then fixed {len(found)} command(s). geode kept "
        f"{'it' if len(found) == 1 else 'them'} as draft crystal(s) to finish (nothing was written to the store):"
    ]
    for p in found:
        lines.append(
            f"- draft {draft_name(p)}: `{_cmd(p['fail'])}` exited {p['fail'].get('exit')}, then "
            f"`{_cmd(p['fix'])}` exited 0"
            + (f" after edits to {', '.join(os.path.basename(t) for t in p['touched'][:3])}" if p["touched"] else "")
            + (" (its rows are still in the spool: `geode drafts` numbers it)" if p["fail_id"] is None else "")
        )
    lines.append(
        "To finish: run `geode drafts` (it files them into the approval queue, redacted of secrets), "
        "write the essence (what to do instead, in your words; the draft holds only what was observed), "
        "then `geode proposals approve <id>` (or `geode proposals reject <id>`: a rejected draft is not "
        "proposed again). If nothing here is worth keeping, say so and stop."
    )
    return "\n".join(lines)


def kept_pairs(settings, session: str) -> list[dict]:
    """The pairs of one session, or [] when the ledger cannot be read within its budget."""
    try:
        return pairs(session_rows(settings, session))
    except sqlite3.Error:
        return []
