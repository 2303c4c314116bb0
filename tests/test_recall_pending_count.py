"""The count of notes waiting for a vector reads only those notes (issue 10, speed): it must be
exactly the plain definition's count, whatever mix of missing, stale and other models' vectors."""

from __future__ import annotations

import itertools

from sqlalchemy import func, or_, select, text, update

from geode.recall.filters import filter_conditions, filter_where
from geode.recall.index_tables import dispose_engines, notes_t
from geode.recall.search import _count_pending, index_for
from tests.stores import fresh_settings, write


def _plain(idx, conds, model_id: str) -> int:
    c = notes_t.c
    with idx.reader.connect() as conn:
        return int(
            conn.execute(
                select(func.count())
                .select_from(notes_t)
                .where(
                    *conds,
                    or_(
                        c.embed_model.is_(None),
                        c.embed_model != model_id,
                        c.embed_hash.is_(None),
                        c.embed_hash != c.embed_text_hash,
                    ),
                )
            ).scalar_one()
        )


def test_the_pending_count_is_the_plain_definitions_count(tmp_path):
    root = tmp_path / "notes"
    states = list(itertools.product([None, "alpha", "mmm", "zeta"], ["none", "same", "other"]))
    for i in range(len(states) * 3):
        kind = "guide" if i % 2 else "note"
        write(root, f"f{i % 4}/n{i:02d}.md", f"---\ntitle: n{i}\ntype: {kind}\n---\nbody {i}\n")
    settings = fresh_settings(root, tmp_path / "home")
    try:
        idx = index_for(settings)
        idx.refresh()
        c = notes_t.c
        with idx.writer.begin() as conn:
            ids = conn.execute(select(c.id).order_by(c.id)).scalars().all()
            for nid, (model, h) in zip(ids, itertools.cycle(states), strict=False):
                hash_sql = {"none": None, "same": c.embed_text_hash, "other": "0" * 64}[h]
                conn.execute(update(notes_t).where(c.id == nid).values(embed_model=model, embed_hash=hash_sql))
            plan = conn.exec_driver_sql(
                # as _count_pending writes it: the partial index named (the statistics refresh
                # takes see every new note stale, and would steer the planner elsewhere)
                "EXPLAIN QUERY PLAN SELECT count(*) FROM recall_note INDEXED BY ix_recall_note_stale "
                "WHERE domain IN ('x') AND "
                "(embed_hash IS NULL OR embed_model IS NULL OR embed_hash != embed_text_hash)"
            ).fetchall()
        assert "ix_recall_note_stale" in str(plan)  # the partial index answers the stale part
        mixed = 0
        for kwargs in ({}, {"type": "guide"}):
            conds, _doms = filter_conditions(settings, **kwargs)
            where, _doms = filter_where(settings, **kwargs)
            for model in ("alpha", "mmm", "zeta", "aaa", "zzz", "mmm2"):
                want = _plain(idx, conds, model)
                assert _count_pending(idx, where, model) == want
                mixed += 0 < want < len(ids) // (2 if kwargs else 1)  # some pending, some not
        assert mixed >= 6
        with idx.writer.begin() as conn:  # every note embedded by one model: nothing pending
            conn.execute(text("UPDATE recall_note SET embed_model = 'mmm', embed_hash = embed_text_hash"))
        conds, _doms = filter_conditions(settings)
        where, _doms = filter_where(settings)
        assert _count_pending(idx, where, "mmm") == 0 == _plain(idx, conds, "mmm")
        assert _count_pending(idx, where, "other") == len(ids) == _plain(idx, conds, "other")
        # filtered: nothing pending in the domain answers 0 from the indexes alone; pending notes
        # that the filter leaves out (a guide re-embedding) are not counted for notes
        gconds, _d = filter_conditions(settings, type="guide")
        guide, _d = filter_where(settings, type="guide")
        nconds, _d = filter_conditions(settings, type="note")
        only_notes, _d = filter_where(settings, type="note")
        assert _count_pending(idx, only_notes, "mmm") == 0 == _plain(idx, nconds, "mmm")
        with idx.writer.begin() as conn:
            conn.execute(text("UPDATE recall_note SET embed_hash = NULL WHERE type = 'guide'"))
        guides = _plain(idx, gconds, "mmm")
        assert guides == len(ids) // 2 and _count_pending(idx, guide, "mmm") == guides
        assert _count_pending(idx, only_notes, "mmm") == 0 == _plain(idx, nconds, "mmm")
    finally:
        dispose_engines()
