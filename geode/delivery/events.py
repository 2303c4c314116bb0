"""The hook events geode listens on, per agent: the one list the installer writes and the hook reads.

Why here and in this shape: the hook (``hook.run``) must know which events it answers, and the
installer (``geode.install.hooks``) which it registers, with what matcher and timeout. Two lists
drifted apart before; now both read this one. It sits in the delivery room and uses plain tuples
(no ``dataclasses``) because the hook imports it on every call.

``PostToolUse`` (and Claude's ``PostToolUseFailure``, which a failing shell command gets
instead) record each shell command's exit status and each edit for the failed-then-fixed drafts
(docs/CAPTURE.md). Each entry is ``(event, matcher, timeout in s)``; a matcher of None means the event takes none.
"""

from __future__ import annotations

#: Claude Code. Small explicit timeouts: the default is 600 s, and a hung hook would stall the
#: agent that long. Stop/SessionEnd only flush, and SessionEnd's whole budget is short.
CLAUDE: tuple[tuple[str, str | None, int], ...] = (
    ("PreToolUse", "Bash|Write|Edit|MultiEdit|NotebookEdit|Read|Grep|Glob", 10),
    ("SessionStart", "startup|resume|clear|compact", 10),
    ("UserPromptSubmit", None, 10),
    ("Stop", None, 5),
    ("SessionEnd", None, 5),
    ("PostToolUse", "Bash|Write|Edit|MultiEdit|NotebookEdit", 5),
    ("PostToolUseFailure", "Bash", 5),
)

#: Codex has no SessionEnd; Stop does the end-of-turn flush there. ``apply_patch`` is Codex's
#: edit tool (also matchable as Edit/Write).
CODEX: tuple[tuple[str, str | None, int], ...] = (
    ("PreToolUse", "Bash|apply_patch|Edit|Write", 10),
    ("SessionStart", "startup|resume|clear|compact", 10),
    ("UserPromptSubmit", None, 10),
    ("Stop", None, 5),
    ("PostToolUse", "Bash|apply_patch|Edit|Write", 5),
)

BY_AGENT: dict[str, tuple[tuple[str, str | None, int], ...]] = {"claude": CLAUDE, "codex": CODEX}

#: Events the hook accepts without acting on them: a ``SubagentStop`` a person wired up by hand
#: opens and flushes the session like any call, and answers nothing.
QUIET: tuple[str, ...] = ("SubagentStop",)

#: Events that only record (``geode.delivery.capture``): answered without the binding index, so
#: the hook's work after a tool call is one ledger write.
RECORD_ONLY: frozenset[str] = frozenset({"PostToolUse", "PostToolUseFailure"})

#: Every event the hook answers (any other is ignored before anything is opened).
HANDLED: frozenset[str] = frozenset({e for specs in BY_AGENT.values() for e, _m, _t in specs} | set(QUIET))
