"""``geode lint``: every way a crystal can never fire, or fires wrongly, with file and line.

The original product's doctor (docs/DESIGN.md, "Lessons from the original product") said "all is well" over crystals that could never fire. Here
each check is a ``Problem`` with a code, and errors make the exit status 1. The Librarian
reuses ``lint_store`` rather than writing these checks a second time.

No green over nothing: a store with no notes, or whose every file failed to load, is itself
an error (``empty-store``), never "0 problems".
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, TypedDict

from geode.delivery import match as _match
from geode.delivery.binding import parse_binding
from geode.delivery.pack import Item, render
from geode.kernel.dates import DateError, date_problems, optional_date
from geode.kernel.note import Note
from geode.kernel.problems import Problem
from geode.kernel.store import StoreLoad, load_store

ESSENCE_GUIDE = 1500
#: a term that selected crystals on more than this share of the ledger's actions is too broad
BROAD_SHARE = 0.25
#: ... once the ledger holds at least this many actions (fewer say little)
BROAD_MIN_ACTIONS = 40
#: rows of one action: the engine stamps them with one time; rows written before it did are
#: taken as one action while less than this apart (one hook call writes its rows within ms)
_ACTION_GAP_S = 0.05
_ACT_KINDS = ("delivered", "withheld", "skipped_budget", "suppressed_backoff")
LIVE_STATE_TYPES = frozenset({"fact", "state", "runbook", "reference", "status", "environment", "config"})
PROVENANCE_HEADINGS = ("where this came from",)


_TERM_CACHE: dict[tuple[str, str], list] = {}


def _term_checks(b, line: int, add, term_shares: dict | None, migrating: bool = True) -> None:
    """Every match term: too broad, never matching, changed by token matching, a duplicate of
    another term of the crystal, or selecting crystals on too many of the ledger's actions.
    ``migrating``: the store was written for the substring rule (``[delivery] terms_written_for``),
    so what a term lost in the change to token matching is worth saying; a store written for
    token matching lost nothing, and saying it would be noise."""
    if "act" not in b.deliver or not b.terms or not b.on:
        return
    seen: set[tuple[str, str]] = set()
    never = 0
    keys: dict[tuple[str, str, str], str] = {}
    for term in b.terms:
        term_never = True
        for action in b.on:
            kind = "bash" if action in _match.BASH_KINDS else action
            probs = _TERM_CACHE.get((term, kind))
            if probs is None:  # a store's terms repeat; the probes cost a few splits each
                if len(_TERM_CACHE) > 100_000:
                    _TERM_CACHE.clear()
                probs = _TERM_CACHE[(term, kind)] = _match.term_problems(term, action)
            if not any(code == "match-never" for code, _s, _m in probs):
                term_never = False
            for code, severity, message in probs:
                if code == "match-meaning-changed" and not migrating:
                    continue
                if (code, message) not in seen:
                    seen.add((code, message))
                    add(line, code, severity, message)
            compiled = _match.compile_term(term, action)
            form = _match.term_form(compiled)
            k = (action, compiled.mode, form)
            if compiled.key and k in keys and keys[k] != term:
                msg = (
                    f"terms {keys[k]!r} and {term!r} are the same term under token-aware matching "
                    "(spaces around shell operators and quotes do not matter); keep one"
                )
                if ("match-duplicate-term", msg) not in seen:
                    seen.add(("match-duplicate-term", msg))
                    add(line, "match-duplicate-term", "warning", msg)
            keys.setdefault(k, term)
        never += term_never
        if term_shares and term in term_shares:
            share, n_actions, n_term = term_shares[term]
            if n_actions >= BROAD_MIN_ACTIONS and share > BROAD_SHARE:
                add(
                    line,
                    "match-frequent",
                    "warning",
                    f"term {term!r} selected crystals on {share:.0%} of the {n_actions:,} actions in the ledger "
                    f"that delivered anything ({n_term:,}; the line is {BROAD_SHARE:.0%}): it fires on almost "
                    "everything, make it longer or rarer",
                )
    if never == len(b.terms):
        add(
            line,
            "match-never-fires",
            "error",
            "no match term of this crystal can ever match under token-aware matching; it never fires",
        )


def _grammar_checks(b, line: int, add) -> None:
    """The term grammar (``match.py``): a command term that no form of its command can reach
    (the term itself, with options between its words, behind ``sudo``, in a pipe, in ``sh -c``),
    named as written: lint never shows a folded term, since ``-D`` and ``-d`` are different
    options."""
    if "act" not in b.deliver or not b.terms or not b.on:
        return
    for term in b.terms:
        for action in b.on:
            forms = _match.unreachable(term, action)
            if forms:
                add(
                    line,
                    "match-unreachable",
                    "warning",
                    f"term {term!r} fires on no form of its command under the term grammar (tried "
                    + ", ".join(repr(f) for f in forms[:3])
                    + f"); write it as the command is typed, or '{_match.EXACT_MARK}{term}' / "
                    f"'{_match.SUBSTRING_MARK}{term}' for the older rules",
                )
                break


def ledger_term_shares(conn) -> dict[str, tuple[float, int, int]]:
    """``{term: (share, actions, actions it selected crystals on)}`` from the ledger's act
    channel. An action is the rows of one session stamped with one time (older rows: less than
    50 ms apart). ``conn`` is a SQLAlchemy connection."""
    from sqlalchemy import text

    rows = conn.execute(
        text(
            "SELECT session, ts, action, term FROM ledger_event WHERE channel = 'act' AND kind IN "
            f"({', '.join(repr(k) for k in _ACT_KINDS)}) ORDER BY session, ts"
        )
    ).fetchall()
    actions = 0
    per_term: dict[str, int] = {}
    last = (None, None, -1e18)
    current: set[str] = set()
    for session, ts, action, term in rows:
        if session != last[0] or action != last[1] or (float(ts) != last[2] and float(ts) - last[2] > _ACTION_GAP_S):
            for t in current:
                per_term[t] = per_term.get(t, 0) + 1
            current = set()
            actions += 1
        current.add(str(term or ""))
        last = (session, action, float(ts))
    for t in current:
        per_term[t] = per_term.get(t, 0) + 1
    return {t: (n / actions, actions, n) for t, n in per_term.items() if t and actions}


def lint_note(
    note: Note, settings, domain: str = "", today: _dt.date | None = None, term_shares: dict | None = None
) -> list[Problem]:
    """Problems of one loaded note (binding, match terms, essence, provenance, freshness)."""
    out: list[Problem] = []
    today = today or _dt.date.today()

    def add(line: int, code: str, severity: str, message: str) -> None:
        out.append(Problem(note.path, line, code, severity, message, domain))

    for line, code, message in note.fm_warnings:
        add(line, code, "warning", message)

    fm = note.frontmatter
    # dates: one reading for every room (geode.kernel.dates); one that is not YYYY-MM-DD is
    # read by none of them (a bad valid_from/valid_to is unbounded there), so it is said here
    for exc in date_problems(fm):
        add(note.line_of(exc.field), "date-not-iso", "warning", f"not an ISO date (YYYY-MM-DD): {exc}")
    crystal = fm.get("crystal")
    if "crystal" in fm and not isinstance(crystal, dict):
        add(
            note.line_of("crystal"),
            "binding-not-mapping",
            "error",
            "'crystal:' must be a mapping (deliver/on/match/who); this crystal never fires",
        )
        crystal = None
    if isinstance(crystal, dict):
        b = parse_binding(crystal, note.fm_lines, tuple(getattr(settings, "known_agents", ()) or ()))
        for issue in b.issues:
            if issue.severity != "info" or issue.code in ("match-list",):
                add(issue.line, issue.code, issue.severity, issue.message)
        _term_checks(
            b,
            note.fm_lines.get("crystal.match") or note.line_of("crystal"),
            add,
            term_shares,
            migrating=getattr(settings, "terms_written_for", "substring") != "tokens",
        )
        _grammar_checks(b, note.fm_lines.get("crystal.match") or note.line_of("crystal"), add)
        if note.essence is None:
            if not note.essence_problems:
                add(
                    note.line_of("crystal"),
                    "no-essence",
                    "error",
                    "bound crystal without '<!-- crystal:essence -->' markers: it loads, lists and delivers nothing",
                )
        elif not note.essence.strip():
            add(note.essence_line, "empty-essence", "error", "the essence between the markers is empty")
        for line, code, message in note.essence_problems:
            add(line, code, "error", message)
        if note.essence:
            n = len(note.essence)
            block = len(render(Item("", domain, note.path, note.path, note.name, "x" * 12, note.essence), "bash"))
            budget = getattr(settings, "budget", 4000)
            if block > budget:
                add(
                    note.essence_line,
                    "essence-over-budget",
                    "error",
                    f"essence is {n:,} characters; with its header it exceeds the {budget:,}-character budget "
                    "of an action, so it is always delivered cut",
                )
            elif n > ESSENCE_GUIDE:
                add(
                    note.essence_line,
                    "essence-long",
                    "warning",
                    f"essence is {n:,} characters, over the {ESSENCE_GUIDE:,} guide; it crowds out other crystals",
                )
        if not any(text.strip().lower().startswith(PROVENANCE_HEADINGS) for _l, _lvl, text in note.headings):
            add(
                note.body_line,
                "no-provenance",
                "warning",
                "no '## Where this came from' section: say where the knowing came from (date, commit, incident)",
            )
    elif note.essence is not None:
        add(
            note.essence_line,
            "essence-unbound",
            "info",
            "essence markers without a 'crystal:' binding: only search finds it",
        )

    # freshness duty: notes that assert live state
    meta = fm.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    note_type = str(fm.get("type") or meta.get("type") or "").lower()
    asserts_live = note_type in LIVE_STATE_TYPES or "last_verified" in fm
    if asserts_live and "last_verified" in fm:
        try:
            lv = optional_date(fm.get("last_verified"), "last_verified")
        except DateError:
            lv = None  # said above (date-not-iso); no freshness can be judged from it
        days = getattr(settings, "freshness_days", 90)
        if lv is None:
            if not any(exc.field == "last_verified" for exc in date_problems(fm)):
                add(note.line_of("last_verified"), "no-last-verified", "warning", "last_verified is empty")
        elif (today - lv).days > days:
            add(
                note.line_of("last_verified"),
                "stale",
                "warning",
                f"last verified {lv.isoformat()}, {(today - lv).days} days ago (duty: every {days} days); "
                "check it still holds",
            )
    elif asserts_live:
        add(1, "no-last-verified", "info", "a note of a live-state type without last_verified")
    return out


def lint_load(
    load: StoreLoad, settings, today: _dt.date | None = None, term_shares: dict | None = None
) -> list[Problem]:
    problems: list[Problem] = [p for p in load.problems]
    names: dict[str, str] = {}
    for note in load.notes:
        problems.extend(lint_note(note, settings, load.domain, today, term_shares))
        if "name" in note.frontmatter:
            prev = names.get(note.name)
            if prev is not None:
                problems.append(
                    Problem(
                        note.path,
                        note.line_of("name"),
                        "duplicate-name",
                        "warning",
                        f"name {note.name!r} is also used by {prev}; names should be unique in a domain",
                        load.domain,
                    )
                )
            else:
                names[note.name] = note.path
    if not load.notes:
        problems.append(
            Problem(
                load.root,
                0,
                "empty-store",
                "error",
                f"examined {load.files_seen} note files and loaded none: nothing was checked",
                load.domain,
            )
        )
    return problems


class LintResult(TypedDict):
    """What ``lint_store`` returns, as ``geode lint --json`` prints it: each problem's
    ``Problem.as_dict``, what was examined, and the counts by severity."""

    problems: list[dict[str, Any]]
    examined: dict[str, int | None]  # ledger_terms: None when the ledger was not read
    errors: int
    warnings: int


def lint_store(settings, today: _dt.date | None = None, term_shares: dict | None = None) -> LintResult:
    """Lint every domain. Returns ``{"problems": [...], "examined": {...}, "errors": n, "warnings": n}``.
    ``term_shares`` (``ledger_term_shares``) adds the check of terms that fire on too much."""
    problems: list[Problem] = []
    examined: dict[str, int] = {"domains": 0, "files": 0, "notes": 0, "crystals": 0, "skipped": 0}
    for domain, root in settings.domain_roots():
        load = load_store(root, domain, settings.max_file_bytes)
        examined["domains"] += 1
        examined["files"] += load.files_seen
        examined["notes"] += len(load.notes)
        examined["crystals"] += sum(1 for n in load.notes if "crystal" in n.frontmatter)
        examined["skipped"] += len([p for p in load.problems if p.severity == "error"])
        problems.extend(lint_load(load, settings, today, term_shares))
    problems.sort(key=lambda p: (p.domain, p.path, p.line, p.code))
    return {
        "problems": [p.as_dict() for p in problems],
        "examined": {**examined},
        "errors": sum(1 for p in problems if p.severity == "error"),
        "warnings": sum(1 for p in problems if p.severity == "warning"),
    }
