"""The Gardener's rule 4: salience follows the work a crystal unlocked (``edit``).

**Salience** (``edit``). A crystal delivered at least ``salience_min_deliveries`` times
since its last salience proposal: when at least half of those deliveries unlocked work
(no lookup followed in that session) it rises by ``salience_step``; when none did it falls
by the step; always within 0..1 (absent counts as 0.5, as the hook reads it). A delivery is
counted once: the next move rests only on rows newer than the ones the last move cited.

Apart from the run (``geode.gardener.agent``) because each rule is its own reading of the
ledger window and its own proposal; it is handed the run's state (``GardenerRun``: the
``[gardener]`` settings, ``notes``, ``held``, ``propose``) and reads nothing off the agent.
"""

from __future__ import annotations

import os

from geode.agents.contract import Context, Finding, Proposed, Report, Skipped
from geode.gardener import edits
from geode.gardener.keys import GardenerRun, proposal_key
from geode.kernel.crystal import RETIRED_STATUSES


class Salience:
    """Raise or lower ``salience`` by the share of deliveries that unlocked work."""

    def __init__(self, run: GardenerRun):
        self.run = run

    def check(self, ctx: Context, s, report: Report) -> None:
        from geode.queue.proposals import FileChange, ProposalDraft, sha256

        ex = report.examined
        ex["salience_judged"] = ex["salience_at_bound"] = 0
        step = self.run.cfg.salience_step
        for cid, d in sorted(s.deliveries.items()):
            if d.count < self.run.cfg.salience_min_deliveries:
                continue
            hit = self.run.notes.get(cid)
            if hit is None:
                continue
            domain, note = hit
            if note.crystal is None or note.status in RETIRED_STATUSES:
                continue
            share = d.unlocked / d.count
            if share >= self.run.cfg.salience_rise_share:
                direction = 1
            elif d.unlocked == 0:
                direction = -1
            else:
                continue
            ex["salience_judged"] += 1
            raw = note.frontmatter.get("salience", 0.5)
            try:
                old = float(0.5 if raw is None else raw)
            except (TypeError, ValueError):
                report.skipped.append(
                    Skipped(
                        note.path, note.fm_lines.get("salience", 1), cid, f"salience {raw!r} is not a number", domain
                    )
                )
                continue
            new = round(min(1.0, max(0.0, old + direction * step)), 2)
            if new == round(old, 2):
                ex["salience_at_bound"] += 1
                continue
            kind = "unlocked-work" if direction > 0 else "never-unlocked"
            msg = (
                f"{d.unlocked} of {d.count} deliveries were followed by no lookup in their session"
                if direction > 0
                else f"none of {d.count} deliveries unlocked work: a lookup followed each"
            )
            finding = Finding(kind, note.path, note.fm_lines.get("salience", 0), cid, msg, domain, severity="info")
            report.findings.append(finding)
            if self.run.held(proposal_key("salience", domain, note.path)):
                continue
            full = os.path.join(ctx.settings.domains[domain], note.path)
            data = open(full, "rb").read()
            try:
                after = edits.set_salience(data, note.path, new)
            except edits.FrontmatterEditError as exc:
                report.skipped.append(
                    Skipped(
                        note.path, exc.line, cid, f"its frontmatter cannot take a salience line safely: {exc}", domain
                    )
                )
                continue
            draft = ProposalDraft(
                agent=self.run.name,
                kind="edit",
                domain=domain,
                title=f"Salience of {note.path}: {old:g} -> {new:g}",
                rationale=(
                    f"{msg}. Salience moves by {step:g} per run within 0..1; these deliveries are not counted again."
                ),
                evidence=[],
                changes=[FileChange(note.path, sha256(data), after)],
                run_id=ctx.run_id or "adhoc",
                key=proposal_key("salience", domain, note.path),
            )
            # it rests on the ledger rows it cites; its finding only says where the step goes (a
            # value geode stepped before may be stepped again by new deliveries)
            self.run.propose(report, Proposed(draft, [finding], list(d.ids), place_facts=False))
