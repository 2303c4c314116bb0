"""What the Gardener's four rules share: the key a proposal is filed under and the stamps of
ledger time.

``proposal_key(rule, domain, path)`` is ``rule:domain:path`` (hashed past 255 characters): the
queue files a ``(run_id, key)`` once, and the run reads the keys it filed before to hold a
proposal that is pending, conflicting, failed or rejected. Apart so that each rule's module
(``stubs``, ``never_fired``, ``bind``, ``salience``) imports these from one place and none
imports another rule or the run. ``GardenerHost`` declares what the rules read off the agent
they are mixed into.
"""

from __future__ import annotations

import datetime as _dt
import hashlib

from geode.agents.contract import Proposed, Report
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


class GardenerHost:
    """What the Gardener's rules (``Stubs``, ``NeverFired``, ``Bind``, ``Salience``) read off the
    agent they are mixed into: the ``[gardener]`` settings ``Gardener._configure`` sets for each
    run (keys and defaults in ``geode.kernel.config.SCHEMA["gardener"]``), the notes read, and the
    two helpers every rule files through. Annotations only (nothing is set on the class) and stubs
    that ``Gardener``'s own methods shadow (it comes first in its MRO), so a rule is typed without
    importing ``Gardener``."""

    name: str
    # [gardener]
    window_days: int
    min_blocked: int
    max_stub_terms: int
    stub_folder: str
    min_deliveries: int
    widen_min_observed: int
    max_new_terms: int
    retire_status: str
    min_searches: int
    salience_step: float
    salience_min_deliveries: int
    salience_rise_share: float
    max_proposals: int
    # this run
    notes: dict[str, tuple[str, Note]]  # "domain:path" -> (domain, note)

    def _held(self, *keys: str) -> bool:
        raise NotImplementedError

    def _propose(self, report: Report, proposed: Proposed) -> None:
        raise NotImplementedError
