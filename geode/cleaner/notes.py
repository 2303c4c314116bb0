"""What the Cleaner reads off a note or a path, shared by its three checks (contradictions,
near-duplicates, folders over their cap) and the run that drives them: a note's folder, a
frontmatter date, the targets of a ``supersedes`` field, the idempotency key of a proposal, and
``CleanerHost``, what the checks read off the agent they are mixed into.
Apart so that each check's module imports these from one place and none imports another check.
"""

from __future__ import annotations

import datetime as _dt
import hashlib

from geode.agents.contract import Context, Finding, Report
from geode.kernel.dates import DateError, optional_date
from geode.kernel.note import Note
from geode.links.resolver import StoreLinks
from geode.recall.embed import Embedder


def folder_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def date_of(note, key: str) -> _dt.date | None:
    """The date of a frontmatter field (``geode.kernel.dates``); None when absent or unreadable
    (the lint reports that as date-not-iso): an unreadable date is never compared as text."""
    try:
        return optional_date(note.frontmatter.get(key), key)
    except DateError:
        return None


def supersedes_targets(value) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for t in items:
        if t in (None, "") or isinstance(t, (dict, list)):
            continue
        t = str(t).strip()
        if t.startswith("[[") and t.endswith("]]"):
            t = t[2:-2].split("|", 1)[0]
        if t:
            out.append(t)
    return out


def proposal_key(raw: str) -> str:
    return raw if len(raw) <= 255 else raw[:180] + ":" + hashlib.sha256(raw.encode()).hexdigest()


class CleanerHost:
    """What the Cleaner's checks (``FolderCaps``, ``NearDuplicates``, ``Contradictions``) read off
    the agent they are mixed into: the per-run settings and per-domain state ``Cleaner`` sets, and
    the helpers it defines. Declared here (annotations only, no values, so nothing is set on the
    class) so that a check is typed without importing ``Cleaner``; each stub below is shadowed by
    ``Cleaner``'s own method, which comes first in its MRO."""

    name: str
    ctx: Context
    # [cleaner] settings, read at the start of a run
    cap: int
    caps: dict[str, int]
    archive_dir: str
    max_archives: int
    archives_made: int
    evidence_days: int  # [cleaner] archive_evidence_days
    ledger_days: float  # days of ledger time the ledger covers (oldest to newest row)
    ledger_last: float  # the newest ledger row's time
    dotted: bool  # the store keeps its hierarchy in dotted names (geode.cleaner.hierarchy)
    _dotted_any: bool  # some domain of this run does
    real_folders: set[str]
    # the domain being examined
    domain: str
    notes: dict[str, Note]
    links: StoreLinks
    used: dict[str, tuple[int, float, int]]  # path -> (uses, last ts, last ledger event id)
    touched: set[str]  # files a proposal of this run already touches
    # near-duplicates: the embedder given to the constructor (None: load the configured one)
    _embedder: Embedder | None
    model_id: str
    # folder caps: the targets of live notes' supersedes, for one domain's notes
    _sup_cache: tuple[dict[str, Note], set[str]] | None

    def resolve(self, target: str) -> str | None:
        raise NotImplementedError

    @staticmethod
    def _age(n: Note) -> tuple:
        raise NotImplementedError

    def _bytes(self, path: str) -> bytes | None:
        raise NotImplementedError

    def _archived(self, path: str) -> bool:
        raise NotImplementedError

    def _free(self, *paths: str) -> bool:
        raise NotImplementedError

    def _status_proposal(
        self, report: Report, path: str, status: str, key: str, title: str, why: str, findings: list[Finding]
    ) -> None:
        raise NotImplementedError
