"""What the Cleaner reads off a note or a path, shared by its three checks (contradictions,
near-duplicates, folders over their cap) and the run that drives them: a note's folder, a
frontmatter date, the targets of a ``supersedes`` field, the idempotency key of a proposal, and
``CleanerRun``, the one run's state every check is handed (settings, the ledger's reach, the
domain being examined, and the helpers that read a note's bytes and file a status proposal).
Apart so that each check's module imports these from one place and none imports another check.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, field

from geode.agents.contract import Context, Finding, Proposed, Report, Skipped
from geode.kernel.dates import DateError, optional_date
from geode.kernel.note import Note
from geode.links.names import loose
from geode.links.resolver import StoreLinks
from geode.queue.provenance import ABSENT, Provenance, load_provenance
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


def note_age(n: Note) -> tuple:
    """Older sorts first: valid_from, then last_verified (absent or unreadable: oldest), then
    path. Dates compare as dates (2024-06-01 before 2024-12-31), never as text."""
    return (date_of(n, "valid_from") or _dt.date.min, date_of(n, "last_verified") or _dt.date.min, n.path)


@dataclass
class CleanerRun:
    """What one Cleaner run shares with its checks (``FolderCaps``, ``NearDuplicates``,
    ``Contradictions``): the ``[cleaner]`` settings, the ledger's reach, and the domain being
    examined (``enter`` sets it). Each check receives this object and reads nothing off the agent;
    the methods below are the ones two or more checks use. It lives as long as ``examine``: the
    notes and links of 100,000 notes are gone once the report is made."""

    ctx: Context
    name: str  # the agent's name, the ``agent`` of every draft
    # [cleaner] settings, read at the start of a run
    cap: int
    caps: dict[str, int]
    archive_dir: str
    max_archives: int
    evidence_days: int  # [cleaner] archive_evidence_days
    # near-duplicates: the embedder given to the constructor (None: load the configured one)
    embedder: Embedder | None = None
    model_id: str = ""  # the embedding model's id, once loaded
    archives_made: int = 0
    ledger_days: float = 0.0  # days of ledger time the ledger covers (oldest to newest row)
    ledger_last: float = 0.0  # the newest ledger row's time
    dotted_any: bool = False  # some domain of this run keeps its hierarchy in dotted names
    # the domain being examined
    domain: str = ""
    dotted: bool = False  # this store keeps its hierarchy in dotted names (geode.cleaner.hierarchy)
    notes: dict[str, Note] = field(default_factory=dict)
    links: StoreLinks = field(init=False)
    used: dict[str, tuple[int, float, int]] = field(default_factory=dict)  # path -> (uses, last ts, last event id)
    touched: set[str] = field(default_factory=set)  # files a proposal of this run already touches
    real_folders: set[str] = field(default_factory=set)
    by_name: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a name's key -> the paths it names
    # folder caps: the targets of live notes' supersedes, for one domain's notes
    sup_cache: tuple[dict[str, Note], set[str]] | None = None
    #: what the applied proposals of this domain wrote (``geode.queue.provenance``): a fact geode
    #: wrote is never evidence for another proposal
    prov: Provenance = field(default_factory=Provenance)

    def enter(self, domain: str, notes: dict[str, Note], links: StoreLinks) -> None:
        """Start on a domain: its notes, its links, and the names they answer to."""
        self.domain = domain
        self.notes = notes
        self.links = links
        self.touched = set()
        self.prov = load_provenance(self.ctx.engine, domain)
        by: dict[str, list[str]] = {}
        for p, n in notes.items():
            keys = {p.casefold(), p.rsplit(".", 1)[0].casefold()}
            for k in (n.stem, n.name, n.permalink, n.title, *n.aliases):
                if k:
                    keys.add(loose(str(k)))
            for k in keys:
                by.setdefault(k, []).append(p)
        # tuples, not sets: 90 MB less at 100,000 notes (a set of one path is 216 bytes)
        self.by_name = {k: tuple(v) for k, v in by.items()}

    def resolve(self, target: str) -> str | None:
        """The one note of this domain a ``supersedes`` target names, else None."""
        for k in (
            target.casefold(),
            target.rsplit(".", 1)[0].casefold() if target.lower().endswith(".md") else None,
            loose(target),
        ):
            if k and k in self.by_name and len(self.by_name[k]) == 1:
                return next(iter(self.by_name[k]))
        return None

    def bytes_of(self, path: str) -> bytes | None:
        """The note's bytes now, or None when it changed since it was read (the next run
        proposes on what is there) or is no longer UTF-8."""
        from geode.queue.changes import current

        cur = current(self.ctx.settings, self.domain, path)
        if cur is None:
            return None
        try:
            text = cur[0].decode("utf-8")
        except UnicodeDecodeError:
            return None
        if text.lstrip("\ufeff") != self.notes[path].text.lstrip("\ufeff"):
            return None  # changed since it was read: the next run proposes on what is there
        return cur[0]

    def geode_wrote(self, path: str, key: str) -> int | None:
        """The applied proposal whose value of frontmatter ``key`` this note still holds, or None
        when the value is a person's."""
        n = self.notes.get(path)
        return self.prov.wrote(path, key, n.frontmatter.get(key, ABSENT) if n is not None else ABSENT)

    def archived(self, path: str) -> bool:
        return path == self.archive_dir or path.startswith(self.archive_dir + "/")

    def free(self, *paths: str) -> bool:
        """No proposal of this run touches any of these files yet."""
        return not any(p in self.touched for p in paths)

    def status_proposal(
        self, report: Report, path: str, status: str, key: str, title: str, why: str, findings: list[Finding]
    ) -> None:
        """A ``status`` proposal setting the note's status, unless another proposal of this run
        touches it or it changed since it was read."""
        from geode.queue.changes import set_frontmatter_status
        from geode.queue.proposals import FileChange, ProposalDraft, ProposalError

        if not self.free(path):
            return
        data = self.bytes_of(path)
        if data is None:
            return
        try:
            after = set_frontmatter_status(data, status, path)
        except ProposalError as exc:
            report.skipped.append(Skipped(path, 0, "status", f"no proposal: {exc}", self.domain))
            return
        self.touched.add(path)
        draft = ProposalDraft(
            agent=self.name,
            kind="status",
            domain=self.domain,
            title=title,
            rationale=why,
            evidence=[],
            changes=[FileChange(path, hashlib.sha256(data).hexdigest(), after)],
            run_id=self.ctx.run_id or "adhoc",
            key=proposal_key(key),
        )
        report.proposed.append(Proposed(draft, findings))
