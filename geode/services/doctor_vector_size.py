"""``geode doctor``'s look at the size of the local vector collection: past the size where the
embedded Chroma engine's inserts slow, say so, and where the vectors can go instead.

Why: the embedded engine builds its HNSW graph in the writing process, on the same cores as
everything else; its insert rate falls as one collection grows, and how far depends on the
vectors (bench/RECALL.md, "Vector inserts: the HNSW knobs, measured"). A store that keeps
growing past ``LOCAL_ENGINE_SLOWS`` passages can keep its vectors on a Chroma server on other
cores or another machine (``[recall] chroma_url``), out of geode's processes. The check is
advice, never a failure: search works at any size, and ``geode upkeep`` fails whenever doctor
does.

Returns ``(ok, examined, message)``, or None when there is nothing to say: a Chroma server is
configured, no local folder was built yet, its collections are smaller, or it cannot be read
(the vectors check reports that)."""

from __future__ import annotations

from typing import Any

#: Passages in one local collection past which doctor names the server mode: the largest size
#: measured (bench/RECALL.md), where inserts run 2.2-3.2x (text-like vectors) to 5.6x (uniform
#: random vectors, HNSW's worst case) slower per CPU second than into a collection of 1,000.
LOCAL_ENGINE_SLOWS = 100_000


def vector_size_check(settings) -> tuple[bool, dict[str, Any], str] | None:
    """Advice when the largest local collection holds more than ``LOCAL_ENGINE_SLOWS`` vectors."""
    from geode.recall import vectors

    try:
        sizes = vectors.local_collection_sizes(settings)
    except vectors.VectorsUnavailable:
        return None
    if not sizes:
        return None
    name, n = max(sizes.items(), key=lambda kv: kv[1])
    if n <= LOCAL_ENGINE_SLOWS:
        return None
    return (
        True,
        {"collection": name, "vectors": n, "past": LOCAL_ENGINE_SLOWS},
        (
            f"the local vector collection {name} holds {n} passages, past {LOCAL_ENGINE_SLOWS}: the embedded "
            "Chroma engine inserts more slowly as it grows (bench/RECALL.md) and shares these cores; for a "
            'store that keeps growing, run a Chroma server elsewhere and set [recall] chroma_url = "http://host:8000" '
            "(or GEODE_CHROMA_URL), then `geode reindex --wipe`"
        ),
    )
