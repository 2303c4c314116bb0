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
from geode.delivery.binding import WHO_CLASSES, parse_binding
from geode.delivery.ledger import skipped_items as ledger_skipped_items
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
            "SELECT session, ts, action, term, kind, crystal_id, detail FROM ledger_event WHERE channel = 'act' "
            f"AND kind IN ({', '.join(repr(k) for k in _ACT_KINDS)}) ORDER BY session, ts"
        )
    ).fetchall()
    actions = 0
    per_term: dict[str, int] = {}
    last = (None, None, -1e18)
    current: set[str] = set()
    for session, ts, action, term, kind, cid, detail in rows:
        if session != last[0] or action != last[1] or (float(ts) != last[2] and float(ts) - last[2] > _ACTION_GAP_S):
            for t in current:
                per_term[t] = per_term.get(t, 0) + 1
            current = set()
            actions += 1
        if kind == "skipped_budget":  # one row per crystal (older) or per action (the skipped set)
            current.update(t for _c, t in ledger_skipped_items(str(cid or ""), str(term or ""), str(detail or "")))
        else:
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
            if issue.code == "unknown-who" and issue.severity == "warning":
                continue  # said by ``who_checks``, which also knows the agent types the ledger has seen
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


def lint_store(
    settings,
    today: _dt.date | None = None,
    term_shares: dict | None = None,
    seen_agents: set[str] | None = None,
) -> LintResult:
    """Lint every domain. Returns ``{"problems": [...], "examined": {...}, "errors": n, "warnings": n}``.
    ``term_shares`` (``ledger_term_shares``) adds the check of terms that fire on too much;
    ``seen_agents`` (``ledger_agent_types``) the agent types a ``who`` value may name."""
    problems: list[Problem] = []
    loads: list[StoreLoad] = []
    examined: dict[str, int] = {"domains": 0, "files": 0, "notes": 0, "crystals": 0, "skipped": 0}
    team = getattr(settings, "team_rules", None) or {}
    for domain, root in settings.domain_roots():
        if domain in team:  # derived from a team's own files: their checks are the team rules'
            examined["domains"] += 1
            found, count = team_rule_problems(settings, domain, team[domain])
            examined["team_rules"] = examined.get("team_rules", 0) + count
            problems.extend(found)
            continue
        load = load_store(root, domain, settings.max_file_bytes)
        examined["domains"] += 1
        examined["files"] += load.files_seen
        examined["notes"] += len(load.notes)
        examined["crystals"] += sum(1 for n in load.notes if "crystal" in n.frontmatter)
        examined["skipped"] += len([p for p in load.problems if p.severity == "error"])
        problems.extend(lint_load(load, settings, today, term_shares))
        loads.append(load)
    problems.extend(store_checks(loads, settings, seen_agents))
    problems.sort(key=lambda p: (p.domain, p.path, p.line, p.code))
    return {
        "problems": [p.as_dict() for p in problems],
        "examined": {**examined},
        "errors": sum(1 for p in problems if p.severity == "error"),
        "warnings": sum(1 for p in problems if p.severity == "warning"),
    }


# -- the rules a team already has ----------------------------------------------------------------
#: how bad each team-rule trouble is: a rule that can never apply is an error; one only a manual
#: mention brings in is legitimate in Cursor, but geode can never deliver it
TEAM_SEVERITY = {"team-rule-never-applies": "warning", "team-rule-empty": "warning"}


def team_rule_problems(settings, domain: str, repo: str) -> tuple[list[Problem], int]:
    """What keeps a team's rules from ever applying (``geode.kernel.team_rules``): a glob that
    matches no file of the repository, a quoted glob, an ``alwaysApply`` that is not a boolean,
    a rule with neither globs nor a description, a CLAUDE.md import of a missing file, a skill
    without a description. Paths are the team files' own, absolute. Returns the problems and
    how many team files were read (none: an error, never a green over nothing)."""
    import os

    from geode.delivery import team_sync
    from geode.kernel import team_rules as tr

    team_sync.sync(settings)
    _notes, _globs, troubles, sections = team_sync.derive(repo)
    troubles += tr.unmatched_globs(repo, sections)
    files = len(tr.discover(repo))
    out = [
        Problem(os.path.join(repo, t.path), t.line, t.code, TEAM_SEVERITY.get(t.code, "error"), t.message, domain)
        for t in troubles
    ]
    if not files:
        out.append(
            Problem(
                repo,
                0,
                "team-rules-none",
                "error",
                "no team rules here (.cursor/rules/*.mdc, CLAUDE.md, AGENTS.md, .claude/skills/*/SKILL.md)",
                domain,
            )
        )
    return out, files


# -- checks across crystals: overlap, who, exemption ------------------------------------------
#: ``who`` values people write for "everyone", each read as the class ``all`` in a suggestion
_WHO_SYNONYMS = {"everybody": "all", "everyone": "all", "any": "all", "anyone": "all", "both": "all", "agents": "all"}


def ledger_agent_types(conn) -> set[str]:
    """The agent types the ledger has seen (``subagent:Explore`` gives ``Explore``): a ``who``
    value naming one of them is real even when ``[delivery] agents`` does not list it.
    ``conn`` is a SQLAlchemy connection."""
    from sqlalchemy import text

    rows = conn.execute(text("SELECT DISTINCT agent FROM ledger_event WHERE agent LIKE '%:%'")).fetchall()
    return {str(a).partition(":")[2] for (a,) in rows if str(a).partition(":")[2]}


def _bound(loads: list[StoreLoad], settings):
    """(domain, note, binding) of every note with a ``crystal:`` mapping that delivers somewhere."""
    agents = tuple(getattr(settings, "known_agents", ()) or ())
    for load in loads:
        for note in load.notes:
            crystal = note.frontmatter.get("crystal")
            if isinstance(crystal, dict):
                b = parse_binding(crystal, note.fm_lines, agents)
                if b.deliver:
                    yield load.domain, note, b


def _suggest_who(value: str, choices: list[str]) -> str:
    from geode.delivery.binding import edit_distance

    low = value.lower()
    best, dist = "", 10**6
    for c in choices:
        d = edit_distance(low, c.lower())
        if d < dist:
            best, dist = c, d
    for word, cls in _WHO_SYNONYMS.items():
        d = edit_distance(low, word)
        if d < dist:
            best, dist = cls, d
    return best if best and dist <= max(2, len(low) // 4) else ""


def who_checks(loads: list[StoreLoad], settings, seen_agents: set[str] | None = None) -> list[Problem]:
    """A ``who`` value that is neither a class (all, main, subagent) nor an agent type configured
    (``[delivery] agents``) or seen in the ledger. The hook takes such a value as an agent type,
    so ``who: everybdy`` silently never reaches the main agent; said with a did-you-mean, as an
    error when the value is close to a class or a known type (a typo), else a warning."""
    known = list(getattr(settings, "known_agents", ()) or ()) + sorted(seen_agents or ())
    out: list[Problem] = []
    for domain, note, b in _bound(loads, settings):
        for v in b.who:
            if v in WHO_CLASSES or v in known:
                continue
            hint = _suggest_who(v, list(WHO_CLASSES) + known)
            where = ", ".join(known) if known else "none configured in [delivery] agents or seen in the ledger"
            out.append(
                Problem(
                    note.path,
                    note.fm_lines.get("crystal.who") or note.line_of("crystal"),
                    "who-unknown",
                    "error" if hint else "warning",
                    f"who value {v!r} is neither a class (all, main, subagent) nor a known agent type ({where}); "
                    f"it reaches only a subagent of that exact type" + (f" (did you mean {hint!r}?)" if hint else ""),
                    domain,
                )
            )
    return out


def _words(text: str) -> set[str]:
    out, cur = set(), []
    for ch in text.lower() + " ":
        if ch.isalnum():
            cur.append(ch)
        elif cur:
            out.add("".join(cur))
            cur = []
    return out


def overlap_checks(loads: list[StoreLoad], settings) -> list[Problem]:
    """Two act crystals where one fires whenever the other does: every action and agent of the
    second is the first's too, and each term of the second is matched by a term of the first
    under the matcher itself (the first's term fires on the second's term written as the action's
    text). Both deliver on every such action, so the agent reads two notes for one pitfall.

    The candidates for a term come from a table of each term's longest word, so a store of many
    crystals is not compared pair by pair."""
    acts = [(d, n, b) for d, n, b in _bound(loads, settings) if "act" in b.deliver and b.on and b.terms]
    by_word: dict[str, set[int]] = {}
    for i, (_d, _n, b) in enumerate(acts):
        for t in b.terms:
            words = _words(t)
            by_word.setdefault(max(words, key=len) if words else "", set()).add(i)
    cache: dict[tuple[str, str, str], bool] = {}

    def fires(ta: str, tb: str, action: str) -> bool:
        k = (ta, tb, action)
        if k not in cache:
            cache[k] = _match.matches(_match.compile_term(ta, action), _match.prepare((action,), tb))
        return cache[k]

    def covers(i: int, j: int) -> bool:
        a, b = acts[i][2], acts[j][2]
        if not set(b.on) <= set(a.on):
            return False
        if "all" not in a.who and not set(b.who) <= set(a.who):
            return False
        return all(any(fires(ta, tb, act) for ta in a.terms) for act in b.on for tb in b.terms)

    out: list[Problem] = []
    said: set[tuple[int, int]] = set()
    for j, (dom_j, note_j, b) in enumerate(acts):
        cands: set[int] = set(by_word.get("", ()))
        for tb in b.terms:
            for w in _words(tb):
                cands |= by_word.get(w, set())
        for i in sorted(cands - {j}):
            if (min(i, j), max(i, j)) in said or not covers(i, j):
                continue
            dom_i, note_i, a = acts[i]
            both = covers(j, i)
            said.add((min(i, j), max(i, j)))
            other = f"{dom_i}:{note_i.path}" if dom_i != dom_j else note_i.path
            if both:
                msg = (
                    f"this crystal and {other} fire on exactly the same actions (terms {', '.join(b.terms)} and "
                    f"{', '.join(a.terms)}): both deliver every time; merge them or make one narrower"
                )
            else:
                msg = (
                    f"{other} fires whenever this crystal does (its terms {', '.join(a.terms)} match every action "
                    f"that {', '.join(b.terms)} match): both deliver every time; merge them or narrow {other}"
                )
            out.append(
                Problem(
                    note_j.path,
                    note_j.fm_lines.get("crystal.match") or note_j.line_of("crystal"),
                    "match-overlap",
                    "warning",
                    msg,
                    dom_j,
                )
            )
    return out


def exempt_share_check(loads: list[StoreLoad], settings) -> list[Problem]:
    """More than ``[control] exempt_share`` (10%) of the store's crystals say ``control: never``:
    each one is delivered every time and left out of the comparison, so a store that exempts
    much has a control arm that can say little. One warning, with the count and the first few."""
    share = float(getattr(settings, "exempt_share", 0.10))
    bound = list(_bound(loads, settings))
    exempt = [(d, n) for d, n, b in bound if b.exempt]
    if not bound or len(exempt) / len(bound) <= share:
        return []
    names = ", ".join(n.path for _d, n in exempt[:5]) + (", ..." if len(exempt) > 5 else "")
    d0, n0 = exempt[0]
    return [
        Problem(
            n0.path,
            n0.fm_lines.get("crystal.control") or n0.line_of("crystal"),
            "exempt-share",
            "warning",
            f"{len(exempt)} of {len(bound)} crystals ({len(exempt) / len(bound):.0%}) say `control: never`, over the "
            f"{share:.0%} of [control] exempt_share: they are never withheld, so the control arm cannot measure "
            f"them ({names})",
            d0,
        )
    ]


def store_checks(loads: list[StoreLoad], settings, seen_agents: set[str] | None = None) -> list[Problem]:
    """The checks that need every crystal at once (``lint_store`` runs them after the notes)."""
    return (
        who_checks(loads, settings, seen_agents) + overlap_checks(loads, settings) + exempt_share_check(loads, settings)
    )
