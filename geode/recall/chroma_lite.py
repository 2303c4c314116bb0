"""Chroma's own engine, read-only, without its Python facade: for one-shot ``geode search`` processes.

Why: ``import chromadb`` costs 0.7-1.1 s on two cores (pydantic settings, OpenTelemetry,
FastAPI types, the HTTP client...), more than the whole budget of a cold ``geode search``
(0.5 s). The embedded ``PersistentClient`` is a thin Python layer over ``chromadb_rust_bindings``
(the Rust engine that owns the folder); importing the bindings alone takes about 40 ms. This
module opens the same folder through the same engine (``chromadb/api/rust.py`` does exactly
these calls) and offers the three reads ``geode.recall.vectors.VectorStore`` makes: ``count``,
``query`` and ``get``. Chroma stays the vector store: the files, the HNSW index and the search
are Chroma's; only the Python wrapper is skipped.

Limits, on purpose:

- read-only (migrations are validated, never applied: a reader never creates or upgrades a
  folder); every write goes through ``chromadb`` under the writer lock, as before;
- one-shot processes only (``geode.recall.vectors.use_lite_reader``): a long-running process
  (``geode serve``) also writes through ``chromadb``, and two engines on one folder in one
  process would each keep their own cache;
- any surprise (a bindings version with another signature, a folder the engine refuses) is
  :class:`LiteUnavailable`, and the caller opens the full client instead.

Errors the engine raises are ``chromadb.errors`` classes (the bindings import them on the error
path only); ``geode.recall.vectors.client_errors`` catches them as before.
"""

from __future__ import annotations

import os

from geode.kernel.errors import ServiceUnavailable

TENANT = "default_tenant"
DATABASE = "default_database"


class LiteUnavailable(ServiceUnavailable):
    """The bindings cannot open this folder here; use ``chromadb.PersistentClient``."""


def _hnsw_cache_size() -> int:
    """What ``chromadb.api.rust.RustBindingsAPI`` uses: the open-file limit / 5 (4 data files and
    one metadata file per HNSW index)."""
    try:
        import resource

        return max(16, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 5)
    except (ImportError, ValueError, OSError):
        return 200


def _engine_errors() -> tuple[type[BaseException], ...]:
    """What the engine raises for a folder it refuses: ``chromadb.errors`` classes (imported only
    when one was raised: this runs in an ``except`` clause) and the OS's."""
    from chromadb.errors import ChromaError

    return (ChromaError, OSError, RuntimeError, ValueError)


class LiteCollection:
    """One collection, answering like ``chromadb.Collection`` for count, query and get."""

    def __init__(self, bindings, collection_id: str, name: str):
        self._b = bindings
        self.id = collection_id
        self.name = name

    def count(self) -> int:
        return int(self._b.count(self.id, TENANT, DATABASE))

    def query(self, query_embeddings, n_results: int = 10, include=("distances",), where=None) -> dict:
        """``where`` as ``get`` takes it: the engine's filtered nearest-neighbour search."""
        import json

        w = json.dumps(where) if where else None
        r = self._b.query(self.id, None, query_embeddings, n_results, w, None, list(include), TENANT, DATABASE)
        return {"ids": r.ids, "distances": r.distances, "metadatas": r.metadatas}

    def get(self, ids=None, where=None, include=(), limit=None, offset=None) -> dict:
        """``where`` as ``chromadb`` takes it (a dict); the engine reads it as JSON, as chromadb's
        own Rust client passes it."""
        import json

        w = json.dumps(where) if where else None
        r = self._b.get(self.id, ids, w, limit, offset or 0, None, list(include), TENANT, DATABASE)
        return {"ids": r.ids, "embeddings": r.embeddings, "metadatas": r.metadatas}


class LiteClient:
    """The folder's engine; ``get_collection`` as ``chromadb.PersistentClient`` offers it."""

    def __init__(self, folder: str):
        try:
            import chromadb_rust_bindings as rb
        except ImportError as exc:
            raise LiteUnavailable(f"chromadb_rust_bindings: {exc}") from exc
        sqlite_path = os.path.join(folder, "chroma.sqlite3")
        if not os.path.isfile(sqlite_path):
            raise LiteUnavailable(f"{sqlite_path} does not exist")
        try:
            cfg = rb.SqliteDBConfig(
                hash_type=rb.MigrationHash.MD5,  # PersistentClient's default (migrations_hash_algorithm)
                migration_mode=rb.MigrationMode.Validate,  # a reader never migrates
                url=sqlite_path,
            )
            self._b = rb.Bindings(
                allow_reset=False, sqlite_db_config=cfg, persist_path=folder, hnsw_cache_size=_hnsw_cache_size()
            )
        except (AttributeError, TypeError) as exc:  # another bindings version: its signature moved
            raise LiteUnavailable(f"chromadb_rust_bindings changed: {exc}") from exc
        except _engine_errors() as exc:  # the full client tries again and says why
            raise LiteUnavailable(f"{type(exc).__name__}: {exc}") from exc

    def collection_or_none(self, name: str) -> LiteCollection | None:
        """The collection named ``name``, or None when there is none (no vectors for that model
        yet), found by listing so that "missing" costs no import of ``chromadb.errors``."""
        for c in self._b.list_collections(None, 0, TENANT, DATABASE):
            if c.name == name:
                return LiteCollection(self._b, str(c.id), name)
        return None
