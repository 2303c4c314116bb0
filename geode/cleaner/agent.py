"""The Cleaner: consolidation. It examines, reports what it examined, and proposes.

Three checks, each a plain class in its own module, composed by ``Cleaner`` and handed the run's
state (``geode.cleaner.notes.CleanerRun``):

- folders over their cap, and the archive proposals that bring them down
  (``geode.cleaner.caps``);
- near-duplicates, two versions of one truth by their subject, their text beyond their folder's
  template and their embedding (``geode.cleaner.duplicates``, with the MinHash blocking in
  ``geode.cleaner.similar`` and the template and subject in ``geode.cleaner.template``);
- contradictions, two versions of one truth by their frontmatter: overlapping stable notes on
  one subject, superseded notes still stable, ``supersedes`` loops
  (``geode.cleaner.contradictions``).

This module holds the run that drives them: the ``[cleaner]`` settings, the ledger's usage
counts (which note was delivered or read), one domain at a time. The name resolver, the guard
that a note has not changed since it was read, and the status proposal two checks share are
``CleanerRun``'s.

One proposal per file per run: a file already touched by a proposal of this run is not touched
by another (its finding stays). Every proposal cites the findings it rests on (and the ledger
row of the last use, for an archived note that was used).
"""

from __future__ import annotations

from geode.agents.contract import Agent, Context, Report, Skipped
from geode.cleaner.caps import FolderCaps
from geode.cleaner.contradictions import Contradictions
from geode.cleaner.duplicates import EMBED_MIN, TEXT_MIN, NearDuplicates
from geode.cleaner.hierarchy import dendron_like_store, group_of
from geode.cleaner.notes import CleanerRun, folder_of
from geode.cleaner.template import SUBJECT_MIN
from geode.kernel.config import default

#: ledger kinds that mean a note was used
USE_KINDS = ("delivered", "read")

EXAMINED_KEYS = (
    "notes",
    "unreadable",
    "folders",
    "folders_capped",
    "folders_over_cap",
    "notes_geode_made",
    "ledger_rows",
    "notes_used",
    "stable_notes",
    "supersedes_edges",
    "subject_pairs",
    "notes_shingled",
    "notes_too_short",
    "pairs_compared",
    "pairs_text_similar",
    "pairs_other_subject",
    "pairs_embedded",
    "notes_embedded",
    "vectors_reused",
)


def _folder_key(folder: str) -> str:
    f = str(folder).strip().strip("/")
    return "" if f in ("", ".") else f


class Cleaner(Agent):
    name = "cleaner"

    def __init__(self, embedder=None):
        self._embedder = embedder

    # -- the run -------------------------------------------------------------------------
    def examine(self, ctx: Context) -> Report:
        report = Report(agent=self.name)
        for key in EXAMINED_KEYS:
            report.examined.setdefault(key, 0)
        cfg = ctx.settings.cleaner  # [cleaner], checked and filled with defaults by load_settings
        run = CleanerRun(
            ctx=ctx,
            name=self.name,
            cap=cfg.cap,
            caps={_folder_key(k): v for k, v in cfg.caps.items()},
            archive_dir=_folder_key(cfg.archive_dir) or _folder_key(default("cleaner", "archive_dir")),
            # max_archives: a queue of 49,000 archives in one night is not a queue a person works through
            max_archives=cfg.max_archives,
            # "not used in the ledger" is evidence only once the ledger covers this many days
            evidence_days=cfg.archive_evidence_days,
            embedder=self._embedder,
        )
        usage, ledger_note = self._usage(ctx.engine, report, run)
        if ledger_note:
            report.skipped.append(Skipped("", 0, "ledger", ledger_note))
        for domain, load in ctx.readable(report):
            self._domain(run, domain, load, usage, report)
        # the run's working state goes with ``run`` when this returns; the no-harm gate runs next in
        # this process (with the resolver, kept in ctx.resolvers): memory at 100,000 notes
        del usage
        report.message = "; ".join(
            filter(
                None,
                [
                    report.message,
                    (
                        f"near-duplicate: same subject (name words Jaccard >= {SUBJECT_MIN:.2f}), "
                        f"text Jaccard >= {TEXT_MIN:.2f} (character 5-grams of what the folder's template leaves) "
                        f"and embedding cosine >= {EMBED_MIN:.2f} ({run.model_id or 'model not loaded: no pair passed the text test'}); "
                        f"cap {run.cap} per folder"
                        + (
                            " and dotted level (the store keeps its hierarchy in dotted names)"
                            if run.dotted_any
                            else ""
                        )
                        + (f", {len(run.caps)} folder cap(s) set" if run.caps else "")
                    ),
                ],
            )
        )
        return report

    # -- the ledger ------------------------------------------------------------------------
    def _usage(self, engine, report: Report, run: CleanerRun) -> tuple[dict, str]:
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
            run.ledger_days = (float(hi) - float(lo)) / 86400.0 if lo is not None and hi is not None else 0.0
            run.ledger_last = float(hi or 0.0)
            return out, "" if rows else "the ledger holds no delivered or read events: no note counts as used"
        except SQLAlchemyError as exc:  # said, never silent
            return {}, f"the ledger could not be read ({type(exc).__name__}: {exc}): no note counts as used"

    # -- one domain --------------------------------------------------------------------------
    def _domain(self, run: CleanerRun, domain: str, load, usage: dict, report: Report) -> None:
        from geode.links.resolver import StoreLinks

        ex = report.examined
        notes = {n.path: n for n in load.notes}
        ex["notes"] += len(notes)
        folders: dict[str, list[str]] = {}
        for p in notes:
            folders.setdefault(folder_of(p), []).append(p)
        ex["folders"] += len(folders)
        # caps follow the store's hierarchy: in a dotted (Dendron) store each dotted level is a group
        run.dotted = dendron_like_store(load.root, notes)
        run.dotted_any = run.dotted_any or run.dotted
        run.real_folders = set(folders)
        groups: dict[str, list[str]] = {}
        for p in notes:
            groups.setdefault(group_of(p, run.dotted), []).append(p)
        links = StoreLinks(load, find_project=False)
        run.ctx.resolvers[domain] = links  # the no-harm gate reuses it where it is the same
        run.enter(domain, notes, links)
        used = {}
        for p, n in notes.items():
            u = usage.get((domain, p)) or usage.get(("id", f"{domain}:{n.permalink}"))
            if u:
                used[p] = u
        ex["notes_used"] += len(used)
        run.used = used
        Contradictions(run).check(report)
        NearDuplicates(run).check(report)
        FolderCaps(run).check(groups, report)
