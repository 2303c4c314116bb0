"""The Gardener's rule 2: a crystal that never fired is widened or retired (``edit`` / ``status``).

**Never fired -> widen or retire** (``edit`` / ``status``). Judged only when the ledger
covers the whole window of ``window_days`` and the window holds at least
``min_deliveries`` deliveries: an act-bound crystal that matched no action in it (not
delivered, withheld, skipped or backed off), whose file did not change inside the window,
gets its match terms widened with terms observed in the ledger in sessions where its topic
came up (a lookup or search named or found it, or hunted one of its terms, tags or
name words), each seen at least ``widen_min_observed`` times; with no such term it is
proposed for retirement (``status: deprecated``).

Apart from the run (``geode.gardener.agent``) because each rule is its own reading of the
ledger window and its own proposal; it is handed the run's state (``GardenerRun``: the
``[gardener]`` settings, ``notes``, ``held``, ``propose``) and reads nothing off the agent.
"""

from __future__ import annotations

import os
from collections import Counter

from geode.agents.contract import Context, Fact, Finding, Proposed, Report, Skipped
from geode.delivery.binding import parse_binding
from geode.gardener import edits
from geode.gardener.keys import DAY, GardenerRun, day_stamp, proposal_key
from geode.gardener.scan import MAX_EVIDENCE
from geode.gardener.terms import clean_term, file_stem
from geode.kernel.crystal import RETIRED_STATUSES
from geode.kernel.dates import ValidityWindow


class NeverFired:
    """Widen the match terms of a crystal that matched nothing in the window, or retire it."""

    def __init__(self, run: GardenerRun):
        self.run = run

    def check(self, ctx: Context, s, report: Report) -> None:
        from geode.queue.changes import status_change
        from geode.queue.proposals import FileChange, ProposalDraft, ProposalError, sha256
        from geode.queue.safepath import UnsafePath

        ex = report.examined
        ex["never_fired"] = 0
        covered_days = (s.ledger_last_ts - s.ledger_first_ts) / DAY
        delivered = s.by_kind.get("delivered", 0)
        if s.ledger_first_ts > s.window_start:
            report.skipped.append(
                Skipped(
                    "",
                    0,
                    "never-fired",
                    (
                        f"not judged: the ledger covers {covered_days:.1f} days, less than the {self.run.cfg.window_days:g}-day window"
                    ),
                )
            )
            return
        if delivered < self.run.cfg.min_deliveries:
            report.skipped.append(
                Skipped(
                    "",
                    0,
                    "never-fired",
                    (
                        f"not judged: the window holds {delivered} deliveries, fewer than the {self.run.cfg.min_deliveries} needed"
                    ),
                )
            )
            return
        # sessions by what came up in them
        by_term: dict[str, set] = {}
        for session, obs in s.observed.items():
            for t, _rid in obs:
                by_term.setdefault(t, set()).add(session)
        by_touch: dict[str, set] = {}
        for session, items in s.touched.items():
            for it in items:
                by_touch.setdefault(it, set()).add(session)
        for cid, (domain, note) in sorted(self.run.notes.items()):
            crystal = note.crystal
            if crystal is None or cid in s.matched or note.status in RETIRED_STATUSES:
                continue
            b = parse_binding(crystal, note.fm_lines)
            if "act" not in b.deliver or any(ch in b.deliver for ch in ("boot", "inject")) or not b.can_fire:
                continue
            if not note.essence:
                continue  # it cannot fire for want of an essence: the Librarian's finding, not ours
            full = os.path.join(ctx.settings.domains[domain], note.path)
            try:
                mtime = os.stat(full).st_mtime
            except OSError:
                continue
            if mtime > s.window_start:
                report.skipped.append(
                    Skipped(
                        note.path,
                        0,
                        cid,
                        "never fired in the window, but the file changed "
                        "inside it: its binding has not had the whole window",
                        domain,
                    )
                )
                continue
            window = ValidityWindow.from_frontmatter(note.frontmatter)
            if window.valid_from is not None and window.opens_after(
                day_stamp(s.window_start)
            ):  # opens_after implies a valid_from
                report.skipped.append(
                    Skipped(
                        note.path, 0, cid, f"never fired, but valid only from {window.valid_from.isoformat()}", domain
                    )
                )
                continue
            ex["never_fired"] += 1
            line = note.fm_lines.get("crystal.match") or note.fm_lines.get("crystal", 1)
            finding = Finding(
                "never-fired",
                note.path,
                line,
                cid,
                f"matched no action in the {self.run.cfg.window_days:g}-day window ({delivered} deliveries of "
                "other crystals in it)",
                domain,
            )
            report.findings.append(finding)
            # the binding that never fired: one geode wrote (a stub, a widened match) is not the
            # person's to be judged by (geode.agents.evidence_gate)
            binding_fact = Fact("frontmatter", note.path, note.line_of("crystal"), {"key": "crystal"})
            if self.run.held(proposal_key("widen", domain, note.path), proposal_key("retire", domain, note.path)):
                continue
            topic = {cid, file_stem(note.path).lower()}
            words = set(b.terms)
            for w in [
                note.name,
                *(
                    (note.frontmatter.get("tags") or [])
                    if isinstance(note.frontmatter.get("tags"), list)
                    else [note.frontmatter.get("tags") or ""]
                ),
            ]:
                for part in str(w).lower().replace("_", "-").replace(" ", "-").split("-"):
                    t = clean_term(part)
                    if t and len(t) >= 4:
                        words.add(t)
            sessions: set = set()
            for it in topic:
                sessions |= by_touch.get(it, set())
            for w in words:
                sessions |= by_term.get(w, set())
            seen: Counter = Counter()
            rows: dict[str, list[int]] = {}
            for sess in sessions:
                for t, rid in s.observed.get(sess, ()):
                    if t in b.terms:
                        continue
                    seen[t] += 1
                    rows.setdefault(t, []).append(rid)
            new = [
                t
                for t, n in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))
                if n >= self.run.cfg.widen_min_observed and not any(t in old or old in t for old in b.terms)
            ]
            new = new[: self.run.cfg.max_new_terms]
            data = open(full, "rb").read()
            if new:
                try:
                    after = edits.widen_match(data, note.path, new)
                except edits.FrontmatterEditError as exc:
                    report.skipped.append(
                        Skipped(
                            note.path,
                            line,
                            cid,
                            "never fired; terms were observed ("
                            + ", ".join(new)
                            + f") but the edit is not safe: {exc}",
                            domain,
                        )
                    )
                    continue
                if after is None:
                    report.skipped.append(
                        Skipped(
                            note.path,
                            line,
                            cid,
                            "never fired; terms were observed ("
                            + ", ".join(new)
                            + ") but its match line is written in a form "
                            "the Gardener does not rewrite",
                            domain,
                        )
                    )
                    continue
                ids = sorted({r for t in new for r in rows[t]})[-MAX_EVIDENCE:]
                draft = ProposalDraft(
                    agent=self.run.name,
                    kind="edit",
                    domain=domain,
                    title=f"Widen the match of {note.path} (+{', '.join(new)})",
                    rationale=(
                        f"{note.path} matched no action in the last {self.run.cfg.window_days:g} days of ledger "
                        f"({delivered} deliveries of other crystals). In {len(sessions)} session(s) where its "
                        f"topic came up, agents hunted or searched for "
                        + ", ".join(f"{t} ({seen[t]}x)" for t in new)
                        + ": added to its match terms."
                    ),
                    evidence=[],
                    changes=[FileChange(note.path, sha256(data), after)],
                    run_id=ctx.run_id or "adhoc",
                    key=proposal_key("widen", domain, note.path),
                )
                self.run.propose(report, Proposed(draft, [finding], ids, [binding_fact]))
                continue
            try:
                change = status_change(ctx.settings, domain, note.path, self.run.cfg.retire_status)
            except (ProposalError, UnsafePath, OSError) as exc:  # gone meanwhile, a refused path, unreadable
                report.skipped.append(Skipped(note.path, line, cid, f"retirement not proposed: {exc}", domain))
                continue
            draft = ProposalDraft(
                agent=self.run.name,
                kind="status",
                domain=domain,
                title=f"Retire {note.path} (never fired)",
                rationale=(
                    f"{note.path} matched no action in the last {self.run.cfg.window_days:g} days of ledger "
                    f"({delivered} deliveries of other crystals), and no term was observed often enough in "
                    f"sessions where its topic came up to widen it: status {self.run.cfg.retire_status}."
                ),
                evidence=[],
                changes=[change],
                run_id=ctx.run_id or "adhoc",
                key=proposal_key("retire", domain, note.path),
            )
            self.run.propose(report, Proposed(draft, [finding], facts=[binding_fact]))
