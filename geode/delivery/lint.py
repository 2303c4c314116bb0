"""``geode lint``: every way a crystal can never fire, or fires wrongly, with file and line.

The original product's doctor said "all is well" over crystals that could never fire. Here
each check is a ``Problem`` with a code, and errors make the exit status 1. The Librarian
reuses ``lint_store`` rather than writing these checks a second time.

No green over nothing: a store with no notes, or whose every file failed to load, is itself
an error (``empty-store``), never "0 problems".
"""

from __future__ import annotations

import datetime as _dt

from geode.delivery.binding import parse_binding
from geode.delivery.dates import DateError, date_problems, optional_date
from geode.delivery.note import Note
from geode.delivery.pack import Item, render
from geode.delivery.problems import Problem
from geode.delivery.store import StoreLoad, load_store

ESSENCE_GUIDE = 1500
LIVE_STATE_TYPES = frozenset({"fact", "state", "runbook", "reference", "status", "environment", "config"})
PROVENANCE_HEADINGS = ("where this came from",)


def lint_note(note: Note, settings, domain: str = "", today: _dt.date | None = None) -> list[Problem]:
    """Problems of one loaded note (binding, essence, provenance, freshness)."""
    out: list[Problem] = []
    today = today or _dt.date.today()

    def add(line: int, code: str, severity: str, message: str) -> None:
        out.append(Problem(note.path, line, code, severity, message, domain))

    for line, code, message in note.fm_warnings:
        add(line, code, "warning", message)

    fm = note.frontmatter
    # dates: one reading for every room (geode.delivery.dates); one that is not YYYY-MM-DD is
    # read by none of them (a bad valid_from/valid_to is unbounded there), so it is said here
    for exc in date_problems(fm):
        add(note.line_of(exc.field), "date-not-iso", "warning", f"not an ISO date (YYYY-MM-DD): {exc}")
    crystal = fm.get("crystal")
    if "crystal" in fm and not isinstance(crystal, dict):
        add(note.line_of("crystal"), "binding-not-mapping", "error",
            "'crystal:' must be a mapping (deliver/on/match/who); this crystal never fires")
        crystal = None
    if isinstance(crystal, dict):
        b = parse_binding(crystal, note.fm_lines, tuple(getattr(settings, "known_agents", ()) or ()))
        for issue in b.issues:
            if issue.severity != "info" or issue.code in ("match-list",):
                add(issue.line, issue.code, issue.severity, issue.message)
        if note.essence is None:
            if not note.essence_problems:
                add(note.line_of("crystal"), "no-essence", "error",
                    "bound crystal without '<!-- crystal:essence -->' markers: it loads, lists and delivers nothing")
        elif not note.essence.strip():
            add(note.essence_line, "empty-essence", "error", "the essence between the markers is empty")
        for line, code, message in note.essence_problems:
            add(line, code, "error", message)
        if note.essence:
            n = len(note.essence)
            block = len(render(Item("", domain, note.path, note.path, note.name, "x" * 12, note.essence), "bash"))
            budget = getattr(settings, "budget", 4000)
            if block > budget:
                add(note.essence_line, "essence-over-budget", "error",
                    f"essence is {n:,} characters; with its header it exceeds the {budget:,}-character budget "
                    "of an action, so it is always delivered cut")
            elif n > ESSENCE_GUIDE:
                add(note.essence_line, "essence-long", "warning",
                    f"essence is {n:,} characters, over the {ESSENCE_GUIDE:,} guide; it crowds out other crystals")
        if not any(text.strip().lower().startswith(PROVENANCE_HEADINGS) for _l, _lvl, text in note.headings):
            add(note.body_line, "no-provenance", "warning",
                "no '## Where this came from' section: say where the knowing came from (date, commit, incident)")
    elif note.essence is not None:
        add(note.essence_line, "essence-unbound", "info", "essence markers without a 'crystal:' binding: only search finds it")

    # freshness duty: notes that assert live state
    meta = fm.get("metadata") if isinstance(fm.get("metadata"), dict) else {}
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
            add(note.line_of("last_verified"), "stale", "warning",
                f"last verified {lv.isoformat()}, {(today - lv).days} days ago (duty: every {days} days); "
                "check it still holds")
    elif asserts_live:
        add(1, "no-last-verified", "info", "a note of a live-state type without last_verified")
    return out


def lint_load(load: StoreLoad, settings, today: _dt.date | None = None) -> list[Problem]:
    problems: list[Problem] = [p for p in load.problems]
    names: dict[str, str] = {}
    for note in load.notes:
        problems.extend(lint_note(note, settings, load.domain, today))
        if "name" in note.frontmatter:
            prev = names.get(note.name)
            if prev is not None:
                problems.append(Problem(note.path, note.line_of("name"), "duplicate-name", "warning",
                                        f"name {note.name!r} is also used by {prev}; names should be unique in a domain",
                                        load.domain))
            else:
                names[note.name] = note.path
    if not load.notes:
        problems.append(Problem(load.root, 0, "empty-store", "error",
                                f"examined {load.files_seen} note files and loaded none: nothing was checked",
                                load.domain))
    return problems


def lint_store(settings, today: _dt.date | None = None) -> dict:
    """Lint every domain. Returns ``{"problems": [...], "examined": {...}, "errors": n, "warnings": n}``."""
    problems: list[Problem] = []
    examined = {"domains": 0, "files": 0, "notes": 0, "crystals": 0, "skipped": 0}
    for domain, root in settings.domain_roots():
        load = load_store(root, domain, settings.max_file_bytes)
        examined["domains"] += 1
        examined["files"] += load.files_seen
        examined["notes"] += len(load.notes)
        examined["crystals"] += sum(1 for n in load.notes if "crystal" in n.frontmatter)
        examined["skipped"] += len([p for p in load.problems if p.severity == "error"])
        problems.extend(lint_load(load, settings, today))
    problems.sort(key=lambda p: (p.domain, p.path, p.line, p.code))
    return {
        "problems": [p.as_dict() for p in problems],
        "examined": examined,
        "errors": sum(1 for p in problems if p.severity == "error"),
        "warnings": sum(1 for p in problems if p.severity == "warning"),
    }
