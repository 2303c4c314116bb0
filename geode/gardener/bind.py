"""The Gardener's rule 3: a note searched again and again with no binding is bound (``edit``).

**Searched but unbound -> bind** (``edit``). A note without a binding found by at least
``min_searches`` searches (``searched`` rows, ``geode.delivery.search_log``) is proposed a binding
to the action that preceded those searches in their sessions (the most common action of
the rows just before them; the terms those rows carried, seen before at least two of the
searches).

Apart from the run (``geode.gardener.agent``) because each rule is its own reading of the
ledger window and its own proposal; it is handed the run's state (``GardenerRun``: the
``[gardener]`` settings, ``notes``, ``held``, ``propose``) and reads nothing off the agent.
"""

from __future__ import annotations

import os
from collections import Counter

from geode.agents.contract import Context, Finding, Proposed, Report, Skipped
from geode.delivery.binding import ACTIONS
from geode.gardener import edits
from geode.gardener.keys import GardenerRun, proposal_key
from geode.gardener.scan import MAX_EVIDENCE
from geode.gardener.terms import clean_term
from geode.kernel.crystal import RETIRED_STATUSES


class Bind:
    """A binding to the action that preceded the searches that found the note."""

    def __init__(self, run: GardenerRun):
        self.run = run

    def check(self, ctx: Context, s, report: Report) -> None:
        from geode.queue.proposals import FileChange, ProposalDraft, sha256

        ex = report.examined
        ex["searched_notes"] = len(s.searched)
        for cid, e in sorted(s.searched.items(), key=lambda kv: (-kv[1].count, kv[0])):
            if e.count < self.run.cfg.min_searches:
                continue
            hit = self.run.notes.get(cid)
            if hit is None:
                report.skipped.append(Skipped("", 0, cid, f"found by {e.count} searches but not in the store now"))
                continue
            domain, note = hit
            if "crystal" in note.frontmatter or note.status in RETIRED_STATUSES:
                continue
            finding = Finding(
                "searched-unbound",
                note.path,
                0,
                cid,
                f"found by {e.count} searches in {len(e.sessions)} session(s) and bound to no action",
                domain,
                severity="info",
            )
            report.findings.append(finding)
            if self.run.held(proposal_key("bind", domain, note.path)):
                continue
            if not e.contexts:
                report.skipped.append(
                    Skipped(
                        note.path,
                        0,
                        cid,
                        "no ledger rows came before its searches in their sessions: no action to bind it to",
                        domain,
                    )
                )
                continue
            acts = Counter(a for c in e.contexts for a in c[0])
            on = sorted(acts.items(), key=lambda kv: (-kv[1], ACTIONS.index(kv[0]) if kv[0] in ACTIONS else 9))[0][0]
            tc: Counter = Counter()
            for c in e.contexts:
                for t in {clean_term(x) for x in c[1]}:
                    if t:
                        tc[t] += 1
            need = 2 if len(e.contexts) >= 2 else 1
            terms = [t for t, n in sorted(tc.items(), key=lambda kv: (-kv[1], kv[0])) if n >= need][:4]
            if not terms:
                report.skipped.append(
                    Skipped(note.path, 0, cid, "the rows before its searches share no term to bind it by", domain)
                )
                continue
            full = os.path.join(ctx.settings.domains[domain], note.path)
            data = open(full, "rb").read()
            try:
                after = edits.add_binding(data, note.path, on, terms)
            except edits.FrontmatterEditError as exc:
                report.skipped.append(
                    Skipped(note.path, exc.line, cid, f"its frontmatter cannot take a binding safely: {exc}", domain)
                )
                continue
            if after is None:
                report.skipped.append(
                    Skipped(note.path, 0, cid, "its frontmatter cannot take a binding safely", domain)
                )
                continue
            ids = sorted(set(e.ids) | {r for c in e.contexts for r in c[2]})[-MAX_EVIDENCE:]
            marker = (
                ""
                if note.essence is not None
                else (
                    " It has no essence markers: mark the part to deliver with <!-- crystal:essence --> ... "
                    "<!-- /crystal:essence --> before it can deliver anything."
                )
            )
            draft = ProposalDraft(
                agent=self.run.name,
                kind="edit",
                domain=domain,
                title=f"Bind {note.path} to {on} ({', '.join(terms)})",
                rationale=(
                    f"{note.path} was found by {e.count} searches in {len(e.sessions)} session(s) but has no "
                    f"binding. Before those searches the agent was at {on} with "
                    + ", ".join(f"{t} ({tc[t]}x)" for t in terms)
                    + "."
                    + marker
                ),
                evidence=[],
                changes=[FileChange(note.path, sha256(data), after)],
                run_id=ctx.run_id or "adhoc",
                key=proposal_key("bind", domain, note.path),
            )
            self.run.propose(report, Proposed(draft, [finding], ids))
