"""What the Gardener's four rules share: the key a proposal is filed under and the stamps of
ledger time.

``proposal_key(rule, domain, path)`` is ``rule:domain:path`` (hashed past 255 characters): the
queue files a ``(run_id, key)`` once, and the run reads the keys it filed before to hold a
proposal that is pending, conflicting, failed or rejected. Apart so that each rule's module
(``stubs``, ``never_fired``, ``bind``, ``salience``) imports these from one place and none
imports another rule or the run. ``GardenerRun`` is the one run's state every rule is handed.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections import Counter
from dataclasses import dataclass, field

from geode.agents.contract import Context, Finding, Proposed, Report, Skipped
from geode.kernel.config import GardenerSettings
from geode.kernel.note import Note

DAY = 86400.0


def iso_stamp(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else "-"


def day_stamp(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d")


def proposal_key(rule: str, domain: str, path: str) -> str:
    key = f"{rule}:{domain}:{path}"
    if len(key) > 255:
        key = f"{rule}:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return key


@dataclass
class GardenerRun:
    """What one Gardener run shares with its rules (``Stubs``, ``NeverFired``, ``Bind``,
    ``Salience``): the ``[gardener]`` settings as one ``GardenerSettings`` (keys and defaults in
    ``geode.kernel.config.SCHEMA["gardener"]``, the constructor's overrides applied: one
    declaration of the table, not a copy of its fields), the notes
    read, what the agent proposed before, and the per-rule cap. Each rule receives it and reads
    nothing off the agent; ``held`` and ``propose`` are the two ways a rule files, and
    ``propose_new_note`` the tail of the rules that draft a new note."""

    name: str  # the agent's name, the ``agent`` of every draft
    cfg: GardenerSettings  # [gardener], the constructor's overrides applied
    # this run
    notes: dict[str, tuple[str, Note]] = field(default_factory=dict)  # "domain:path" -> (domain, note)
    prior: dict = field(default_factory=dict)  # {"held", "consumed", "watermarks"}: ``Gardener._prior``
    rule: str = ""  # the rule now running
    capped: Counter = field(default_factory=Counter)  # rule -> proposals over its cap
    mine: list[str] = field(default_factory=list)  # the rule of each proposal made this run

    def held(self, *keys: str) -> bool:
        """Already proposed and waiting (or refused), or this rule's cap for the run is reached."""
        if any(k in self.prior.get("held", ()) for k in keys):
            return True
        if sum(1 for p in self.mine if p == self.rule) >= self.cfg.max_proposals:
            self.capped[self.rule] += 1
            return True
        return False

    def propose(self, report: Report, proposed: Proposed) -> None:
        self.mine.append(self.rule)
        report.proposed.append(proposed)

    def propose_new_note(
        self,
        ctx: Context,
        report: Report,
        finding: Finding,
        rule: str,
        text: str,
        title: str,
        rationale: str,
        rows: list[int],
        not_proposed: str,
    ) -> None:
        """File ``text`` as a new note at the finding's path and domain, the tail the stub and
        capture rules share: the finding is reported whatever happens; a draft whose key
        (``proposal_key(rule, domain, path)``) is held is not filed again; a file there already,
        a refused path or an unreadable folder is a ``Skipped`` row (``not_proposed: why``), not an
        error; the draft cites the finding and the ledger ``rows`` it rests on."""
        from geode.queue.changes import new_note_change
        from geode.queue.proposals import ProposalDraft, ProposalError
        from geode.queue.safepath import UnsafePath

        report.findings.append(finding)
        domain, path = finding.domain, finding.path
        key = proposal_key(rule, domain, path)
        if self.held(key):
            return
        try:
            change = new_note_change(ctx.settings, domain, path, text)
        except (ProposalError, UnsafePath, OSError) as exc:  # exists already, a refused path, unreadable
            report.skipped.append(Skipped(path, 0, finding.target, f"{not_proposed}: {exc}", domain))
            return
        draft = ProposalDraft(
            agent=self.name,
            kind="new_note",
            domain=domain,
            title=title,
            rationale=rationale,
            evidence=[],
            changes=[change],
            run_id=ctx.run_id or "adhoc",
            key=key,
        )
        self.propose(report, Proposed(draft, [finding], rows))
