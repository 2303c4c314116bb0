"""The Corrector's fixes: for each stored finding it acts on, the one change that repairs it, or
nothing (skipped, with the reason): a link rewritten to the note's new place, a frontmatter
value quoted, a ``review_due`` mark for a note past its freshness duty.

Apart from the run (``geode.corrector.agent``), which applies the fixes of one file to a copy,
checks the bounds and files the proposal: these decide *what* to change, one finding at a time.
``Fixes`` is handed the run's state (``CorrectorRun``: the day freshness is judged on and the
link cache) by ``Corrector``; it reads nothing else off the agent.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field

from geode.agents.contract import Context, Finding, Report, Skipped
from geode.corrector.edits import quote_value
from geode.kernel.crystal import RETIRED_STATUSES
from geode.kernel.dates import DateError, ValidityWindow, optional_date
from geode.kernel.header_format import KIND_WORDS, header_kind
from geode.links.refs import Ref

#: frontmatter read leniently that strict YAML rejects, repaired by quoting the value
QUOTABLE = ("unquoted-special", "reserved-indicator", "lenient-block-indicator", "unquoted-colon")
AWAITING_REVIEW = "awaiting-review"
REVIEW_KEY = "review_due"
#: days a person is given to re-verify a stale note: ``review_due`` is today plus these, a date
#: to act by. Never ``last_verified + freshness_days``: for a note verified two years ago that is
#: a date long past, a deadline nobody can meet (issue 24)
REVIEW_WITHIN_DAYS = 14


@dataclass
class Fix:
    """One change: to one line (``apply(content) -> new content``, None: cannot), or to one
    frontmatter key (``set_key``: ``(key, value, after)`` for the one frontmatter editor,
    ``geode.kernel.frontmatter_edit``; ``line`` is then the line it changes or follows)."""

    kind: str  # link | quote | review
    line: int
    finding: Finding
    describe: str
    apply: Callable[[str], str | None] | None = None  # a line's text -> its new text, None: cannot
    set_key: tuple | None = None
    added: dict = field(default_factory=dict)  # frontmatter keys this fix adds


def _date(value, field: str) -> _dt.date | None:
    """``geode.kernel.dates``' reading; None when absent or not a date (the lint says so)."""
    try:
        return optional_date(value, field)
    except DateError:
        return None


@dataclass
class CorrectorRun:
    """What one Corrector run shares with its fixes: the day freshness is judged on (None: the
    day it runs) and the per-note link references, read once per domain (``refs_cache``, reset
    when the domain's links are built)."""

    today: _dt.date | None = None
    refs_cache: dict[str, list[Ref]] = field(default_factory=dict)  # note path -> its references


class Fixes:
    """One ``Fix`` per finding, or None (skipped, with the reason), over the run's state."""

    def __init__(self, run: CorrectorRun):
        self.run = run

    def link_fix(self, links, note, f: Finding, report: Report) -> Fix | None:
        ex = report.examined
        if note is None:
            report.skipped.append(Skipped(f.path, f.line, f.target, "the note is no longer in the store", f.domain))
            return None
        cache = self.run.refs_cache
        if note.path not in cache:
            cache[note.path] = links.refs(note)
        for ref in cache[note.path]:
            shown = ref.target + (f"#{ref.anchor}" if ref.anchor else "")
            if ref.line != f.line or shown != f.target:
                continue
            res = links.resolve(note, ref)
            if res.status == "ok":
                report.skipped.append(Skipped(f.path, f.line, f.target, "the link resolves now", f.domain))
                return None
            sugg = f.suggestion or res.suggestion
            if not sugg or sugg not in links.notes:
                ex["no_good_target"] += 1
                return None
            new_text = links.new_target_text(note, ref, sugg)
            if not new_text:
                ex["no_good_target"] += 1
                report.skipped.append(
                    Skipped(f.path, f.line, f.target, f"no safe way to write a link to {sugg} in this syntax", f.domain)
                )
                return None
            if ref.syntax in ("wiki", "relation") and not ref.alias and not ref.anchor and new_text != ref.target:
                # keep what the reader saw: [[Old]] -> [[New|Old]] ([[Old|New]] where the alias comes first)
                new_text = (
                    f"{ref.target}|{new_text}" if links.wiki_order == "alias|target" else f"{new_text}|{ref.target}"
                )
            from geode.links.relink import rewrite_line

            def apply(content: str, ref=ref, new_text=new_text):
                return rewrite_line(content, ref, new_text)

            ex["findings_acted_on"] += 1
            return Fix("link", f.line, f, f"line {f.line}: {f.target} -> {sugg}", apply)
        report.skipped.append(Skipped(f.path, f.line, f.target, "the link is no longer on that line", f.domain))
        return None

    def quote_fix(self, note, f: Finding, report: Report) -> Fix | None:
        if note is None:
            report.skipped.append(Skipped(f.path, f.line, f.target, "the note is no longer in the store", f.domain))
            return None
        kind = header_kind(note.path, note.text)
        if kind in KIND_WORDS:
            report.skipped.append(
                Skipped(f.path, f.line, f.target, f"{KIND_WORDS[kind]}: its lines are kept as they are", f.domain)
            )
            return None
        codes = [code for line, code, _m in note.fm_warnings if line == f.line]
        if not codes:
            report.skipped.append(Skipped(f.path, f.line, f.target, "the frontmatter reads cleanly now", f.domain))
            return None
        report.examined["findings_acted_on"] += 1
        if not any(c in QUOTABLE for c in codes):
            return Fix(
                "quote", f.line, f, f"line {f.line}: no mechanical repair for {', '.join(codes)}", lambda content: None
            )
        return Fix("quote", f.line, f, f"line {f.line}: quote the value", quote_value)

    def review_fix(self, ctx: Context, domain: str, note, stored: Finding | None, report: Report) -> Fix | None:
        from geode.delivery.lint import lint_note

        fm = note.frontmatter
        if "last_verified" not in fm or note.status in RETIRED_STATUSES:
            return None
        kind = header_kind(note.path, note.text)
        if kind in KIND_WORDS:  # no key is added to a header its own tool reads
            report.skipped.append(
                Skipped(
                    note.path, note.line_of("last_verified"), REVIEW_KEY, f"{KIND_WORDS[kind]}: never edited", domain
                )
            )
            return None
        today = self.run.today or _dt.date.today()
        if ValidityWindow.from_frontmatter(fm).closed_before(today):
            return None  # its last day (valid_to, inclusive) is past: it records what held, no live state
        report.examined["stale_checked"] += 1
        days = int(getattr(ctx.settings, "freshness_days", 90) or 90)
        lv = _date(fm.get("last_verified"), "last_verified")
        f = stored
        if f is None:
            problems = [p for p in lint_note(note, ctx.settings, domain, today) if p.code == "stale"]
            if not problems:
                return None
            f = Finding("stale", note.path, problems[0].line, "last_verified", problems[0].message, domain)
            report.findings.append(f)
        if lv is None:
            return None
        duty = lv + _dt.timedelta(days=days)  # the day it fell stale
        due = today + _dt.timedelta(days=REVIEW_WITHIN_DAYS)  # the day to re-verify it by: ahead
        marked = _date(fm.get(REVIEW_KEY), REVIEW_KEY) if REVIEW_KEY in fm else None
        if marked is not None and marked >= duty:  # marked since it fell stale: a person's turn
            report.examined["awaiting_review"] += 1
            report.findings.append(
                Finding(
                    AWAITING_REVIEW,
                    note.path,
                    note.line_of(REVIEW_KEY),
                    REVIEW_KEY,
                    f"marked for re-verification ({REVIEW_KEY}: {marked.isoformat()}); a person must check that it "
                    f"still holds and update last_verified",
                    domain,
                    severity="info",
                )
            )
            return None
        report.examined["findings_acted_on"] += 1
        describe = (
            f"last_verified {lv.isoformat()} is past its {days}-day freshness duty (since {duty.isoformat()}): "
            f"{REVIEW_KEY}: {due.isoformat()}, {REVIEW_WITHIN_DAYS} days from today"
        )
        # an older mark (re-verified once, stale again) is moved forward; a new one goes right
        # after last_verified
        line = note.line_of(REVIEW_KEY) if REVIEW_KEY in fm else note.line_of("last_verified")
        return Fix(
            "review",
            line,
            f,
            describe,
            set_key=(REVIEW_KEY, due.isoformat(), "last_verified"),
            added={REVIEW_KEY: due.isoformat()},
        )
