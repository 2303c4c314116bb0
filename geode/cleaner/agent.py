"""The Cleaner: consolidation. It examines, reports what it examined, and proposes.

Three checks, each in its own module and mixed into ``Cleaner``:

- folders over their cap, and the archive proposals that bring them down
  (``geode.cleaner.caps``);
- near-duplicates, two versions of one truth by their text and embedding
  (``geode.cleaner.duplicates``, with the MinHash blocking in ``geode.cleaner.similar``);
- contradictions, two versions of one truth by their frontmatter: overlapping stable notes on
  one subject, superseded notes still stable, ``supersedes`` loops
  (``geode.cleaner.contradictions``).

This module holds the run that drives them: the ``[cleaner]`` settings, the ledger's usage
counts (which note was delivered or read), one domain at a time, the name resolver, the guard
that a note has not changed since it was read, and the status proposal two checks share.

One proposal per file per run: a file already touched by a proposal of this run is not touched
by another (its finding stays). Every proposal cites the findings it rests on (and the ledger
row of the last use, for an archived note that was used).
"""

from __future__ import annotations

import datetime as _dt
import hashlib

from geode.agents.contract import Agent, Context, Finding, Proposed, Report, Skipped
from geode.cleaner.caps import FolderCaps
from geode.cleaner.contradictions import Contradictions
from geode.cleaner.duplicates import EMBED_MIN, TEXT_MIN, NearDuplicates
from geode.cleaner.hierarchy import dendron_like_store, group_of
from geode.cleaner.notes import date_of, folder_of, proposal_key
from geode.kernel.config import default
from geode.links.names import loose

#: ledger kinds that mean a note was used
USE_KINDS = ("delivered", "read")

EXAMINED_KEYS = (
    "notes",
    "unreadable",
    "folders",
    "folders_capped",
    "folders_over_cap",
    "ledger_rows",
    "notes_used",
    "stable_notes",
    "supersedes_edges",
    "subject_pairs",
    "notes_shingled",
    "notes_too_short",
    "pairs_compared",
    "pairs_text_similar",
    "pairs_embedded",
    "notes_embedded",
    "vectors_reused",
)


def _folder_key(folder: str) -> str:
    f = str(folder).strip().strip("/")
    return "" if f in ("", ".") else f


class Cleaner(Contradictions, NearDuplicates, FolderCaps, Agent):
    name = "cleaner"

    def __init__(self, embedder=None):
        self._embedder = embedder

    # -- the run -------------------------------------------------------------------------
    def examine(self, ctx: Context) -> Report:
        report = Report(agent=self.name)
        for key in EXAMINED_KEYS:
            report.examined.setdefault(key, 0)
        cfg = ctx.settings.cleaner  # [cleaner], checked and filled with defaults by load_settings
        self.cap = cfg.cap
        self.caps = {_folder_key(k): v for k, v in cfg.caps.items()}
        self.archive_dir = _folder_key(cfg.archive_dir) or _folder_key(default("cleaner", "archive_dir"))
        # max_archives: a queue of 49,000 archives in one night is not a queue a person works through
        self.max_archives = cfg.max_archives
        # "not used in the ledger" is evidence only once the ledger covers this many days
        self.evidence_days = cfg.archive_evidence_days
        self.ledger_days = 0.0
        self.ledger_last = 0.0
        self._dotted_any = False
        self.archives_made = 0
        self.ctx = ctx
        usage, ledger_note = self._usage(ctx.engine, report)
        if ledger_note:
            report.skipped.append(Skipped("", 0, "ledger", ledger_note))
        for domain, load in ctx.readable(report):
            self._domain(ctx, domain, load, usage, report)
        # the last domain's working state is not needed once the report is made; the no-harm gate
        # runs next in this process (with the resolver, kept in ctx.resolvers): memory at 100,000 notes
        del usage
        for attr in ("notes", "used", "_by", "_sup_cache", "links", "real_folders"):
            self.__dict__.pop(attr, None)
        report.message = "; ".join(
            filter(
                None,
                [
                    report.message,
                    (
                        f"near-duplicate: text Jaccard >= {TEXT_MIN:.2f} (character 5-grams, boilerplate dropped) "
                        f"and embedding cosine >= {EMBED_MIN:.2f} ({getattr(self, 'model_id', '') or 'model not loaded: no pair passed the text test'}); "
                        f"cap {self.cap} per folder"
                        + (
                            " and dotted level (the store keeps its hierarchy in dotted names)"
                            if self._dotted_any
                            else ""
                        )
                        + (f", {len(self.caps)} folder cap(s) set" if self.caps else "")
                    ),
                ],
            )
        )
        return report

    # -- the ledger ------------------------------------------------------------------------
    def _usage(self, engine, report: Report) -> tuple[dict, str]:
        """``{(domain, path) or ("id", crystal_id): (uses, last_ts, last_event_id)}``."""
        if engine is None:
            return {}, "no records database: no note counts as used"
        from sqlalchemy import func, inspect, or_, select
        from sqlalchemy.exc import SQLAlchemyError

        try:
            if not inspect(engine).has_table("ledger_event"):
                return {}, "the ledger has no table yet: no note counts as used"
            from geode.records.models import LedgerEvent, table_of

            t = table_of(LedgerEvent)
            q = (
                select(t.c.domain, t.c.path, t.c.crystal_id, func.count(), func.max(t.c.ts), func.max(t.c.id))
                .where(or_(t.c.kind.in_(USE_KINDS), t.c.action == "read"))
                .group_by(t.c.domain, t.c.path, t.c.crystal_id)
            )
            out: dict = {}
            rows = 0
            with engine.connect() as conn:
                for domain, path, cid, n, last, last_id in conn.execute(q):
                    rows += int(n)
                    for key in ((domain or "", path or ""), ("id", cid or "")):
                        if not key[1]:
                            continue
                        prev = out.get(key)
                        if prev is None:
                            out[key] = (int(n), float(last or 0), int(last_id))
                        else:
                            out[key] = (prev[0] + int(n), max(prev[1], float(last or 0)), max(prev[2], int(last_id)))
            report.examined["ledger_rows"] += rows
            from geode.evidence.stats import not_manual

            with engine.connect() as conn:
                lo, hi = conn.execute(select(func.min(t.c.ts), func.max(t.c.ts)).where(not_manual())).one()
            self.ledger_days = (float(hi) - float(lo)) / 86400.0 if lo is not None and hi is not None else 0.0
            self.ledger_last = float(hi or 0.0)
            return out, "" if rows else "the ledger holds no delivered or read events: no note counts as used"
        except SQLAlchemyError as exc:  # said, never silent
            return {}, f"the ledger could not be read ({type(exc).__name__}: {exc}): no note counts as used"

    # -- one domain --------------------------------------------------------------------------
    def _domain(self, ctx: Context, domain: str, load, usage: dict, report: Report) -> None:
        from geode.links.resolver import StoreLinks

        ex = report.examined
        notes = {n.path: n for n in load.notes}
        ex["notes"] += len(notes)
        folders: dict[str, list[str]] = {}
        for p in notes:
            folders.setdefault(folder_of(p), []).append(p)
        ex["folders"] += len(folders)
        # caps follow the store's hierarchy: in a dotted (Dendron) store each dotted level is a group
        self.dotted = dendron_like_store(load.root, notes)
        self._dotted_any = self._dotted_any or self.dotted
        self.real_folders = set(folders)
        groups: dict[str, list[str]] = {}
        for p in notes:
            groups.setdefault(group_of(p, self.dotted), []).append(p)
        self.touched: set[str] = set()
        self.domain = domain
        self.notes = notes
        self.links = StoreLinks(load, find_project=False)
        ctx.resolvers[domain] = self.links  # the no-harm gate reuses it where it is the same
        self._resolver(notes)
        used = {}
        for p, n in notes.items():
            u = usage.get((domain, p)) or usage.get(("id", f"{domain}:{n.permalink}"))
            if u:
                used[p] = u
        ex["notes_used"] += len(used)
        self.used = used
        self._contradictions(report)
        self._duplicates(report)
        self._caps(groups, report)

    # -- names ---------------------------------------------------------------------------------
    def _resolver(self, notes) -> None:
        by: dict[str, list[str]] = {}
        for p, n in notes.items():
            keys = {p.casefold(), p.rsplit(".", 1)[0].casefold()}
            for k in (n.stem, n.name, n.permalink, n.title, *n.aliases):
                if k:
                    keys.add(loose(str(k)))
            for k in keys:
                by.setdefault(k, []).append(p)
        # tuples, not sets: 90 MB less at 100,000 notes (a set of one path is 216 bytes)
        self._by: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in by.items()}

    def resolve(self, target: str) -> str | None:
        for k in (
            target.casefold(),
            target.rsplit(".", 1)[0].casefold() if target.lower().endswith(".md") else None,
            loose(target),
        ):
            if k and k in self._by and len(self._by[k]) == 1:
                return next(iter(self._by[k]))
        return None

    @staticmethod
    def _age(n) -> tuple:
        """Older sorts first: valid_from, then last_verified (absent or unreadable: oldest), then
        path. Dates compare as dates (2024-06-01 before 2024-12-31), never as text."""
        return (date_of(n, "valid_from") or _dt.date.min, date_of(n, "last_verified") or _dt.date.min, n.path)

    def _bytes(self, path: str) -> bytes | None:
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

    def _archived(self, path: str) -> bool:
        return path == self.archive_dir or path.startswith(self.archive_dir + "/")

    def _free(self, *paths: str) -> bool:
        return not any(p in self.touched for p in paths)

    def _status_proposal(
        self, report, path: str, status: str, key: str, title: str, why: str, findings: list[Finding]
    ) -> None:
        from geode.queue.changes import set_frontmatter_status
        from geode.queue.proposals import FileChange, ProposalDraft, ProposalError

        if not self._free(path):
            return
        data = self._bytes(path)
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
