"""The Corrector: bounded, mechanical fixes for what the agents before it found.

It runs last in an upkeep run and reads the findings the Librarian, the Cleaner and the
Gardener stored in the same run (``Context.prior_findings``); it never calls them. From those
it proposes, one ``edit`` proposal per file:

- **link rewrites** (``broken-link``) and **signpost entries** (``signpost-stale``) whose note
  was renamed or moved: the new place comes from the finding's suggestion (the move history of
  applied proposals, or the one unambiguous match), re-checked against the store now. When a
  pending proposal already changes that line of that file (the Librarian proposes the same
  rewrites in the same run) the fix is not proposed twice; it is listed as skipped.
- **frontmatter that strict YAML rejects** (``frontmatter-not-yaml``), where the repair is
  mechanical: the value is quoted (``globs: **/*.py`` -> ``globs: "**/*.py"``,
  ``match: | tail, |tail`` -> ``match: "| tail, |tail"``, ``description: Deploy: steps`` ->
  ``description: "Deploy: steps"``; a value continued over lines is left to a person, since
  quoting its first line would end it there). The delivery core reads these leniently
  and no agent before it flags the ``match: |`` form, so the Corrector takes those from the
  parser's own warnings (``lenient-block-indicator``) and records them as its own findings.
  Never a header its own tool reads in its own format (``geode.kernel.header_format``): a Cursor
  rule's ``globs: **/*.rs`` is Cursor's syntax (quoted, Cursor keeps the quotes and the rule
  stops attaching), Hugo's TOML and Logseq's properties are not YAML either.
- **notes past their freshness duty** (``stale``): the note gets one new frontmatter line,
  ``review_due: <today + 14 days>`` (a date to act by, never one past), right after ``last_verified``. Its status
  is left alone (a ``status`` rewrite would lose what the note was, and the Cleaner reads
  statuses). No agent before it stores ``stale`` findings today, so when none is stored the
  Corrector takes them from the delivery lint (``geode.delivery.lint.lint_note``, code ``stale``),
  the same check ``geode lint`` runs, and records them as its own findings. Retired notes and
  notes whose ``valid_to`` (the last day they hold, inclusive: ``geode.kernel.dates``) is
  before today (they record what held) have no duty. A note already
  marked is a finding for a person (``awaiting-review``), never a second proposal.

Bounds: at most ``max_lines`` (5) lines of a file change in one proposal (a replaced line
counts once, an inserted one once); the frontmatter must mean what it meant (plus the one key
added), the note must still parse, and its body and essence must read the same once link
targets are masked. An edit over the bound becomes a ``correction-over-bound`` finding, one
that fails a check a ``correction-not-mechanical`` finding, each with the diff a person would
have been shown. Every byte outside the changed lines is kept (BOM, CRLF, no final newline).

A file that another pending proposal will change is left alone this run (skipped, with the
proposal's id): two proposals computed against the same bytes conflict once one is applied.

The fix for each finding is chosen in ``geode.corrector.fixes``; this module holds the run, the
pending proposals it must not collide with, and one file's bounded edit and proposal.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os

from geode.agents.contract import Agent, Context, Fact, Finding, Proposed, Report, Skipped, one_note
from geode.corrector.edits import FileLines, changed_lines, check_edit, line_map, unified
from geode.corrector.fixes import CorrectorRun, Fix, Fixes
from geode.kernel.frontmatter_edit import FrontmatterEditError, set_key
from geode.kernel.header_format import is_tool_header

#: the stored finding kinds the Corrector acts on
LINK_KINDS = ("broken-link", "signpost-stale")
YAML_KINDS = ("frontmatter-not-yaml",)
STALE_KINDS = ("stale",)
#: the finding kinds the Corrector itself stores (and ``geode.corrector.fixes.AWAITING_REVIEW``)
OVER_BOUND = "correction-over-bound"
NOT_MECHANICAL = "correction-not-mechanical"
MAX_LINES = 5


def _for_a_person(report: Report, domain: str, path: str, fix: Fix, why_not: str) -> None:
    """One fix the Corrector will not make, left to a person as a ``NOT_MECHANICAL`` finding
    (what the fix was, why no mechanical edit does it) and counted as ``not_mechanical``."""
    report.examined["not_mechanical"] += 1
    report.findings.append(
        Finding(
            NOT_MECHANICAL,
            path,
            fix.line,
            fix.finding.target,
            f"{fix.finding.kind}: {fix.describe}; {why_not}; for a person",
            domain,
        )
    )


class Corrector(Agent):
    name = "corrector"
    #: the day freshness is judged on (None: the day it runs)
    today: _dt.date | None = None

    def __init__(self, max_lines: int = MAX_LINES, today: _dt.date | None = None):
        if max_lines < 1:
            raise ValueError("max_lines must be at least 1")
        self.max_lines = max_lines
        if today is not None:
            self.today = today

    # -- the run ---------------------------------------------------------------------------
    def examine(self, ctx: Context) -> Report:
        report = Report(agent=self.name)
        ex = report.examined
        for key in (
            "notes",
            "unreadable",
            "findings_read",
            "findings_acted_on",
            "notes_touched",
            "lines_changed",
            "fixes_proposed",
            "already_proposed",
            "deferred",
            "over_bound",
            "not_mechanical",
            "awaiting_review",
            "no_good_target",
            "stale_checked",
        ):
            ex.setdefault(key, 0)
        prior = self._prior(ctx, report)
        for f in prior:
            ex["findings_read"] += 1
            ex[f"read:{f.kind}"] = ex.get(f"read:{f.kind}", 0) + 1
        moves = {}
        if ctx.engine is not None:
            from sqlalchemy.exc import SQLAlchemyError

            try:
                from geode.links.relink import move_history

                moves = move_history(ctx.engine)
            except SQLAlchemyError as exc:  # the queue unreadable: say so, work from the suggestions stored
                report.message = f"move history unavailable ({exc}); stored suggestions only"
        fixer = Fixes(CorrectorRun(today=self.today))
        for domain, load in ctx.readable(report):
            ex["notes"] += len(load.notes)
            mine = [f for f in prior if (f.domain or domain) == domain]
            self._domain(ctx, domain, load, mine, moves.get(domain, {}), report, fixer)
        return report

    def _prior(self, ctx: Context, report: Report) -> list[Finding]:
        """The findings the agents before it stored in this run (its own from an earlier,
        interrupted attempt of the same run are left out)."""
        own: set[int] = set()
        if ctx.engine is not None and ctx.run_id:
            from sqlalchemy.exc import SQLAlchemyError

            try:
                from geode.agents.contract import load_findings

                own = {f.id for f in load_findings(ctx.engine, ctx.run_id, agent=self.name) if f.id is not None}
            except SQLAlchemyError as exc:  # logged: an earlier attempt's own findings may be read again
                import logging

                logging.getLogger(__name__).warning(
                    "corrector: its earlier findings of run %s cannot be read: %s", ctx.run_id, exc
                )
                own = set()
        return [f for f in ctx.prior_findings if f.id is None or f.id not in own]

    # -- one domain ------------------------------------------------------------------------
    def _domain(
        self, ctx: Context, domain: str, load, prior: list[Finding], moves: dict, report: Report, fixer: Fixes
    ) -> None:
        notes = {n.path: n for n in load.notes}
        fixes: dict[str, list[Fix]] = {}

        # links and signpost entries
        link_findings = [f for f in prior if f.kind in LINK_KINDS]
        if link_findings:
            from geode.links.resolver import StoreLinks

            links = StoreLinks(load, moves=moves)
            fixer.run.refs_cache = {}
            for f in link_findings:
                fix = fixer.link_fix(links, notes.get(f.path), f, report)
                if fix is not None:
                    fixes.setdefault(f.path, []).append(fix)

        # frontmatter strict YAML rejects
        flagged: set[tuple[str, int]] = set()
        for f in prior:
            if f.kind in YAML_KINDS:
                flagged.add((f.path, f.line))
                fix = fixer.quote_fix(notes.get(f.path), f, report)
                if fix is not None:
                    fixes.setdefault(f.path, []).append(fix)
        for note in load.notes:  # the lenient forms no agent before it flags
            if is_tool_header(note.path, note.text):
                continue  # its tool's own format (a Cursor rule's header): not YAML to repair
            for line, code, message in note.fm_warnings:
                if code == "lenient-block-indicator" and (note.path, line) not in flagged:
                    f = Finding(
                        "frontmatter-not-yaml",
                        note.path,
                        line,
                        "",
                        f"{message} (other YAML readers reject this file)",
                        domain,
                    )
                    report.findings.append(f)
                    fix = fixer.quote_fix(note, f, report)
                    if fix is not None:
                        fixes.setdefault(f.path, []).append(fix)

        # freshness duty
        stored_stale = {f.path: f for f in prior if f.kind in STALE_KINDS}
        for note in load.notes:
            fix = fixer.review_fix(ctx, domain, note, stored_stale.get(note.path), report)
            if fix is not None:
                fixes.setdefault(note.path, []).append(fix)

        if not fixes:
            return
        pending = self._pending(ctx, domain, sorted(fixes))
        for path in sorted(fixes):
            with one_note(report, self.name, domain, path):
                self._propose(ctx, domain, load.root, notes[path], fixes[path], pending.get(path, []), report)

    # -- the queue -------------------------------------------------------------------------
    def _pending(self, ctx: Context, domain: str, paths: list[str]) -> dict[str, list[dict]]:
        """Pending proposals of other agents (or of earlier runs) that change these files, with
        the lines each one changes: ``{path: [{id, agent, map, sha, removes}]}``."""
        if ctx.engine is None or not paths:
            return {}
        from sqlalchemy import select

        from geode.queue import tables as q

        q.ensure_tables(ctx.engine)
        out: dict[str, list[dict]] = {}
        with ctx.engine.connect() as conn:
            for start in range(0, len(paths), 500):
                chunk = paths[start : start + 500]
                rows = conn.execute(
                    select(q.P.c.id, q.P.c.agent, q.P.c.run_id, q.C.c.path, q.C.c.before_sha, q.C.c.before, q.C.c.after)
                    .join(q.C, q.C.c.proposal_id == q.P.c.id)
                    .where(q.P.c.status == "pending", q.P.c.domain == domain, q.C.c.path.in_(chunk))
                    .order_by(q.P.c.id)
                ).all()
                for pid, agent, run_id, path, before_sha, before, after in rows:
                    if agent == self.name and run_id == ctx.run_id:
                        continue  # its own, from an interrupted attempt: filed again under the same key
                    entry = {"id": int(pid), "agent": agent, "sha": before_sha, "removes": after is None, "map": {}}
                    if before is not None and after is not None:
                        entry["map"] = line_map(bytes(before), bytes(after))
                    out.setdefault(path, []).append(entry)
        return out

    # -- one file ----------------------------------------------------------------------------
    def _propose(
        self, ctx: Context, domain: str, root: str, note, fixes: list[Fix], pending: list[dict], report: Report
    ) -> None:
        ex = report.examined
        path = note.path
        try:
            with open(os.path.join(root, path), "rb") as fh:
                data = fh.read()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            report.skipped.append(Skipped(path, 0, "", f"cannot read it again: {exc}", domain))
            return
        if text != note.text:
            report.skipped.append(
                Skipped(path, 0, "", "changed since it was read; the next run proposes on what is there", domain)
            )
            return
        if "\r" in text.replace("\r\n", ""):
            # a CR that ends no line (LF CR, CR alone): the readers break lines there and the
            # line editor does not, so a fix's line number would name another line: for a person
            for fix in fixes:
                _for_a_person(
                    report,
                    domain,
                    path,
                    fix,
                    "the file has a carriage return that does not end a line (LF CR or CR line endings), "
                    "which no edit is made on",
                )
            return
        sha = hashlib.sha256(data).hexdigest()
        live = [p for p in pending if p["sha"] == sha]  # a pending proposal on older bytes can never apply
        lines = FileLines(text)

        # a line another pending proposal already changes is not proposed twice
        remaining: list[Fix] = []
        for fix in fixes:
            hit = next((p for p in live if fix.line in p["map"] or p["removes"]), None)
            if hit is None:
                remaining.append(fix)
                continue
            ex["already_proposed"] += 1
            mine = fix.apply(lines.get(fix.line) or "") if fix.apply is not None else None
            same = mine is not None and hit["map"].get(fix.line) == mine
            why = (
                f"the same edit is already proposed by the {hit['agent']} (pending proposal {hit['id']})"
                if same
                else f"pending proposal {hit['id']} of the {hit['agent']} already changes this line"
            )
            if hit["removes"]:
                why = f"pending proposal {hit['id']} of the {hit['agent']} moves or removes this file"
            report.skipped.append(Skipped(path, fix.line, fix.finding.target, why, domain))
        if not remaining:
            return
        if live:
            ids = ", ".join(str(p["id"]) for p in live)
            for fix in remaining:
                ex["deferred"] += 1
                report.skipped.append(
                    Skipped(
                        path,
                        fix.line,
                        fix.finding.target,
                        f"deferred: pending proposal {ids} changes this file and two proposals "
                        "on the same bytes conflict; proposed after it is decided",
                        domain,
                    )
                )
            return

        # apply them to a copy: the line edits in order (their line numbers are the file's), then
        # the key edits, each by the one frontmatter editor
        added: dict = {}
        failed: list[tuple[Fix, str]] = []
        done: list[Fix] = []
        for fix in remaining:
            if fix.set_key is not None:
                continue
            cur = lines.get(fix.line)
            new = fix.apply(cur) if cur is not None and fix.apply is not None else None  # no apply: no line edit
            if new is None or new == cur:
                failed.append((fix, "no mechanical edit does it"))
                continue
            lines.set(fix.line, new)
            added.update(fix.added)
            done.append(fix)
        after_text = lines.text()
        for fix in remaining:
            if fix.set_key is None:
                continue
            key, value, after_key = fix.set_key
            try:
                after_text = set_key(after_text.encode("utf-8"), key, value, path=path, after=after_key).decode("utf-8")
            except FrontmatterEditError as exc:
                failed.append((fix, f"the frontmatter editor refuses it ({exc.message})"))
                continue
            added.update(fix.added)
            done.append(fix)
        for fix, why_not in failed:
            _for_a_person(report, domain, path, fix, why_not)
        if not done:
            return
        n = changed_lines(text, after_text)
        diff = unified(text, after_text, path)
        findings = [fx.finding for fx in done]
        if n > self.max_lines:
            ex["over_bound"] += 1
            report.findings.append(
                Finding(
                    OVER_BOUND,
                    path,
                    done[0].line,
                    "",
                    f"{n} lines would change, over the bound of {self.max_lines} per file: "
                    + "; ".join(fx.describe for fx in done)
                    + ". For a person. The edit would be:\n"
                    + diff,
                    domain,
                )
            )
            return
        why = check_edit(text, after_text, path, added)
        if why:
            ex["not_mechanical"] += 1
            report.findings.append(
                Finding(
                    NOT_MECHANICAL,
                    path,
                    done[0].line,
                    "",
                    f"{why}: " + "; ".join(fx.describe for fx in done) + ". For a person. The edit would be:\n" + diff,
                    domain,
                )
            )
            return
        from geode.queue.proposals import FileChange, ProposalDraft

        kinds = []
        for label, kind in (
            ("rewrite {} link(s)", "link"),
            ("quote {} frontmatter value(s)", "quote"),
            ("mark for re-verification", "review"),
        ):
            k = sum(1 for fx in done if fx.kind == kind)
            if k:
                kinds.append(label.format(k))
        key = f"correct:{domain}:{path}"
        if len(key) > 255:
            key = "correct:" + hashlib.sha256(key.encode()).hexdigest()
        draft = ProposalDraft(
            agent=self.name,
            kind="edit",
            domain=domain,
            title=f"Correct {path}: " + ", ".join(kinds),
            rationale=(
                "Bounded, mechanical fixes for stored findings: "
                + "; ".join(fx.describe for fx in done)
                + f". {n} of at most {self.max_lines} lines change; the frontmatter means what it meant"
                + (f" (plus {', '.join(sorted(added))})" if added else "")
                + "; the essence and body read the same apart from link targets."
            ),
            evidence=[],
            changes=[FileChange(path, sha, after_text.encode("utf-8"))],
            run_id=ctx.run_id or "adhoc",
            key=key,
        )
        facts = []  # what it rests on besides its findings' lines (geode.agents.evidence_gate)
        for fx in done:
            if fx.kind == "link" and fx.finding.suggestion:
                facts.append(Fact("file", fx.finding.suggestion, 0, "the link's new target"))
            elif fx.kind == "review":
                facts.append(Fact("frontmatter", path, fx.finding.line, {"key": "last_verified"}))
        report.proposed.append(Proposed(draft, findings, facts=facts))
        ex["notes_touched"] += 1
        ex["lines_changed"] += n
        ex["fixes_proposed"] += len(done)
