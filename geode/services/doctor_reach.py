"""The parts of ``geode doctor`` that look at what an agent meets rather than at the store:
the recall index prompt-time recall reads, the vectors search by meaning reads (far behind the
notes while no build runs?), the hooks as installed (do they point at an
interpreter and a hookmain.py that exist?) and the hooks' error log.

Why: "every part can do its job" must not be said while the UserPromptSubmit hook hands over
nothing (no recall index), while the installed hooks run an interpreter that is gone (a deleted
virtual environment: every tool call silently gets nothing), or while the hooks have been
failing since the last look. Each function returns ``(ok, examined, message)`` or None when the
part is not configured (no hooks installed anywhere doctor looks: nothing to check).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

#: Where doctor remembers when it last ran, so that only hook errors newer than that fail it.
LAST_RUN_FILE = "doctor-last-run"


def recall_check(settings, notes: int) -> tuple[bool, dict, str]:
    """The recall index holds the store's notes: what prompt-time recall and search read."""
    from sqlalchemy.exc import SQLAlchemyError

    from geode.recall.recall_index import RecallIndex

    try:
        held = RecallIndex(settings).counts()["notes"]
    except (SQLAlchemyError, OSError) as exc:
        return False, {}, f"the recall index cannot be read ({type(exc).__name__}: {exc}): run `geode reindex`"
    if held == 0 and notes:
        return (
            False,
            {"notes": 0},
            f"the recall index is empty, the store holds {notes} notes: prompt-time recall hands over "
            "nothing; run `geode reindex`",
        )
    if held < notes:
        return False, {"notes": held}, f"the recall index holds {held} of {notes} notes: run `geode reindex`"
    return True, {"notes": held}, f"the recall index holds all {held} notes (prompt-time recall can answer)"


def hook_files(project: str | os.PathLike[str] | None = None, home_dir: str | os.PathLike[str] | None = None):
    """Every file geode's hooks may be installed in, for this project and this user."""
    proj = Path(project or os.getcwd())
    home = Path(home_dir) if home_dir is not None else Path.home()
    return [
        proj / ".claude" / "settings.local.json",
        proj / ".claude" / "settings.json",
        home / ".claude" / "settings.json",
        proj / ".codex" / "hooks.json",
        home / ".codex" / "hooks.json",
    ]


def installed_commands(files) -> list[tuple[Path, str]]:
    """(file, command) of each geode hook command found; a file that cannot be read is skipped."""
    from geode.install.hooks import is_owned_command

    found: list[tuple[Path, str]] = []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        hooks = data.get("hooks") if isinstance(data, dict) else None
        for groups in (hooks or {}).values() if isinstance(hooks, dict) else ():
            for g in groups if isinstance(groups, list) else ():
                for h in g.get("hooks", []) if isinstance(g, dict) else ():
                    cmd = h.get("command") if isinstance(h, dict) else None
                    if isinstance(cmd, str) and is_owned_command(cmd) and (f, cmd) not in found:
                        found.append((f, cmd))
    return found


def hooks_check(files) -> tuple[bool, dict, str] | None:
    """Each installed geode hook command names an interpreter and a hookmain.py that exist."""
    found = installed_commands(files)
    if not found:
        return None
    broken = []
    for f, cmd in found:
        try:
            words = [w for w in shlex.split(cmd) if "=" not in w.split("/")[0]]  # drop VAR=value prefixes
        except ValueError:
            broken.append(f"{f}: cannot parse {cmd!r}")
            continue
        paths = [w for w in words if os.path.isabs(w)]
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:
            broken.append(f"{f}: {', '.join(missing)} does not exist")
    where = sorted({str(f) for f, _ in found})
    if broken:
        return (
            False,
            {"commands": len(found)},
            "installed hooks point at what is gone (every tool call gets nothing): "
            + "; ".join(broken)
            + ": run `geode hooks install` again",
        )
    return (
        True,
        {"commands": len(found)},
        f"{len(found)} hook command(s) run an existing interpreter ({', '.join(where)})",
    )


def hook_errors_check(home: str) -> tuple[bool, dict, str]:
    """No hook error since doctor last ran (the hook never blocks the agent, so it logs instead)."""
    log = Path(home) / "hook-errors.log"
    stamp = Path(home) / LAST_RUN_FILE
    try:
        since = float(stamp.read_text().strip())
    except (OSError, ValueError):
        since = 0.0
    if not log.is_file():
        return True, {"new_errors": 0}, "no hook errors logged"
    fresh = [
        line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if _entry_time(line) > since
    ]
    if fresh:
        return (
            False,
            {"new_errors": len(fresh)},
            f"{len(fresh)} hook error(s) in {log} since doctor last ran; the latest: {fresh[-1][:200]}",
        )
    return True, {"new_errors": 0}, f"no hook errors in {log} since doctor last ran"


def _entry_time(line: str) -> float:
    """The time of a log entry's first line (``2026-11-30T11:00:00 KeyError: ...``); 0 for the
    traceback lines that follow it."""
    import time

    try:
        return time.mktime(time.strptime(line[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return 0.0


def remember_run(home: str, now: float) -> None:
    """Note when doctor ran: the hook errors before it have been seen."""
    try:
        Path(home).mkdir(parents=True, exist_ok=True)
        (Path(home) / LAST_RUN_FILE).write_text(f"{now}\n")
    except OSError:  # a home doctor cannot write is reported by the ledger check
        pass


#: Vectors are "far behind" when more than this share of the notes ...
VECTORS_BEHIND_SHARE = 0.10
#: ... and more than this many notes have no vector (a handful of fresh notes is normal).
VECTORS_BEHIND_NOTES = 20
#: A background build started less than this long ago counts as running even before it holds
#: the writer lock (the interpreter and the model take a few seconds to load).
VECTORS_GRACE_S = 120.0


def _construct(reason: str) -> str:
    """The construct the hook's reader declined, out of the reader's or the lint's sentence."""
    for prefix in ("frontmatter: ", "not in the hook's YAML subset: ", "read by the full YAML parser ("):
        reason = reason.removeprefix(prefix)
    return reason.split("); the hook", 1)[0]


def hook_reader_check(unreadable: list[tuple[str, str, int, str, bool]], crystals: int) -> tuple[bool, dict, str]:
    """Every crystal's frontmatter is one the hook's standard-library reader takes. A crystal
    only the full YAML parser reads is delivered from the index geode built, but the hook drops
    it the moment it changes (until the next geode command refreshes the index): a binding that
    works until someone edits it. Fails naming each such crystal and its construct.

    ``unreadable``: ``Index.hook_unreadable()`` after a refresh off the hook (which reads every
    note the hook declined, so what is left unknown could not be read at all)."""
    bad = [(d, p, line, reason) for d, p, line, reason, is_crystal in unreadable if is_crystal]
    examined = {"crystals": crystals, "outside_hook_subset": len(bad)}
    if not bad:
        return True, examined, f"the hook reads the frontmatter of all {crystals} crystals"
    named = "; ".join(f"{d}:{p}:{line} ({_construct(reason)})" for d, p, line, reason in bad[:10])
    more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
    return (
        False,
        examined,
        f"{len(bad)} of {crystals} crystals have frontmatter the hook's reader declines: {named}{more}. "
        "The hook drops such a crystal whenever it changes; rewrite it without anchors, aliases, tags "
        "or explicit keys (`geode lint` names the line)",
    )


def vectors_far_behind(total: int, missing: int) -> bool:
    """More than 10 % of the notes and more than 20 notes have no vector."""
    return missing > VECTORS_BEHIND_NOTES and missing > VECTORS_BEHIND_SHARE * total


def vectors_check(settings, skip_model: bool = False, now: float | None = None) -> tuple[bool, dict, str] | None:
    """The notes have their vectors, or a build is on its way: search by meaning (and the
    MCP ``search``) misses every note without one, and says nothing about it.

    Fails when more than 10 % of the notes and more than 20 notes have no vector and no build
    runs (a writer holds the lock) or was started in the last two minutes; a build in progress
    is reported as such. None when the recall index holds no notes (the recall check fails)."""
    import time

    from sqlalchemy.exc import SQLAlchemyError

    from geode.recall import vectors
    from geode.services import vector_build

    model_id = None
    if not skip_model:
        from geode.recall.embed import ModelUnavailable, get_embedder

        try:
            model_id = get_embedder(settings).model_id
        except (ModelUnavailable, ValueError):
            return None  # the model check says why; without a model there are no vectors to expect
    try:
        total, missing = vector_build.notes_without_vectors(settings, model_id)
        writing = vectors.writer_active(settings)
    except (SQLAlchemyError, OSError):
        return None  # the recall check reports an index that cannot be read
    if total == 0:
        return None
    examined = {"notes": total, "without_vector": missing}
    have = f"{total - missing} of {total} notes have a vector"
    if writing:
        return True, examined, f"a vector build is running: {have}"
    stamp = vector_build.last_build(settings.home)
    age = (now or time.time()) - float(stamp.get("started_at", 0)) if stamp else None
    if missing and age is not None and 0 <= age < VECTORS_GRACE_S:
        return True, examined, f"a vector build was started {age:.0f} s ago: {have}"
    far = vectors_far_behind(total, missing)
    if far:
        log = Path(settings.home) / vector_build.LOG_FILE
        tail = ""
        if stamp and log.is_file():
            lines = [x for x in log.read_text(encoding="utf-8", errors="replace").splitlines() if x.strip()]
            tail = f"; the last background build's log ({log}) ends: {lines[-1][:200]}" if lines else ""
        return (
            False,
            examined,
            f"vectors are far behind: {missing} of {total} notes have none and no build is running "
            f"(more than {VECTORS_BEHIND_SHARE:.0%} and more than {VECTORS_BEHIND_NOTES} fails): search by "
            f"meaning misses them; run `geode reindex`{tail}",
        )
    if missing:
        return True, examined, f"{have}; {missing} wait for the next `geode reindex` or background build"
    return True, examined, f"all {total} notes have a vector"


def workers_check(capp) -> tuple[bool, dict, str]:
    """A live worker serves the configured queue (``geode.agents.celery_app.workers``); asked
    only once the broker answered. Green with no broker (tasks run in-process)."""
    from geode.agents.celery_app import workers

    ok, message = workers(capp)
    return ok, {}, message
