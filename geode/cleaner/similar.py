"""Near-duplicate candidates that scale: shingles, MinHash and banded LSH, then exact checks.

Why blocking: comparing every pair is n²/2 (5·10⁹ pairs on 100,000 notes). A near-duplicate
must pass BOTH tests (text overlap AND embedding similarity), so a pair whose text overlap is
low can never be one: blocking on the text is complete for the pairs that matter, up to the
probability of LSH below.

- Shingles: character 5-grams of the note's words (lower-cased, joined by one space), the first
  ``MAX_SHINGLE_CHARS`` characters. Character shingles survive small rewordings that word
  shingles do not ("restart the pool with" / "restart the pool using").
- MinHash: ``NUM_PERM`` = 120 hash functions of 64-bit shingle hashes (multiply-add with odd
  constants from a fixed seed: deterministic across processes, unlike Python's ``hash``).
- LSH: ``BANDS`` = 40 bands of ``ROWS`` = 3; two notes are a candidate pair when one band of
  their signatures is equal. A pair with Jaccard 0.5 becomes a candidate with probability
  1 - (1 - 0.5³)⁴⁰ = 0.995; Jaccard 0.3: 0.66 (false candidates are removed by the exact check).
- Exact check: the Jaccard index of the two shingle sets, recomputed for candidates only.

A bucket holding more than ``MAX_BUCKET`` notes (a store of templated notes sharing a band) is
not expanded into all its pairs: it is reported, never silently dropped.
"""

from __future__ import annotations

import re

import numpy as np

SHINGLE = 5
MAX_SHINGLE_CHARS = 20_000
MIN_SHINGLES = 40  # shorter texts (about 40 characters) overlap by chance: not judged
NUM_PERM = 120
BANDS = 40
ROWS = 3
MAX_BUCKET = 200
_WORD = re.compile(r"\w+")
_MASK61 = np.uint64((1 << 61) - 1)

_rng = np.random.default_rng(20261129)
_A = _rng.integers(1, 2**63 - 1, size=NUM_PERM, dtype=np.int64).astype(np.uint64) | np.uint64(1)
_B = _rng.integers(0, 2**63 - 1, size=NUM_PERM, dtype=np.int64).astype(np.uint64)


def normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))[:MAX_SHINGLE_CHARS]


def shingles(text: str) -> np.ndarray:
    """Sorted unique 64-bit hashes of the character ``SHINGLE``-grams of ``normalise(text)``."""
    t = normalise(text)
    data = np.frombuffer(t.encode("utf-8"), dtype=np.uint8).astype(np.uint64)
    if len(data) < SHINGLE:
        return np.zeros(0, dtype=np.uint64)
    n = len(data) - SHINGLE + 1
    h = np.full(n, np.uint64(1469598103934665603), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(SHINGLE):  # FNV-1a over the window, vectorised
            h = (h ^ data[j : j + n]) * np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
    return np.unique(h)


def signature(sh: np.ndarray) -> np.ndarray:
    """The MinHash signature (``NUM_PERM`` uint64) of a shingle set."""
    with np.errstate(over="ignore"):
        mixed = sh[:, None] * _A[None, :] + _B[None, :]
        mixed ^= mixed >> np.uint64(31)
    return mixed.min(axis=0)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    if not len(a) or not len(b):
        return 0.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


DF_BITS = 24
BOILER_MIN_DF = 5
BOILER_SHARE = 0.01


class DocFreq:
    """How many notes hold each shingle (a 2^24-slot count sketch: a collision can only raise a
    count, so it can only drop more shingles as boilerplate, never keep one that is)."""

    def __init__(self):
        self.counts = np.zeros(1 << DF_BITS, dtype=np.uint32)
        self.docs = 0

    def add(self, sh: np.ndarray) -> None:
        if len(sh):
            slots = np.unique(sh & np.uint64((1 << DF_BITS) - 1)).astype(np.int64)
            self.counts[slots] += 1
        self.docs += 1

    @property
    def limit(self) -> int:
        """A shingle held by more notes than this is boilerplate (a template's words)."""
        return max(BOILER_MIN_DF, int(self.docs * BOILER_SHARE))

    def distinctive(self, sh: np.ndarray) -> np.ndarray:
        if not len(sh):
            return sh
        return sh[self.counts[(sh & np.uint64((1 << DF_BITS) - 1)).astype(np.int64)] <= self.limit]


def candidate_pairs(sigs: dict[int, np.ndarray]) -> tuple[set[tuple[int, int]], list[int]]:
    """Pairs ``(i, j)``, ``i < j``, sharing a band; and the sizes of the buckets too large to expand."""
    pairs: set[tuple[int, int]] = set()
    oversize: list[int] = []
    keys = sorted(sigs)
    if not keys:
        return pairs, oversize
    mat = np.stack([sigs[k] for k in keys])
    for band in range(BANDS):
        part = np.ascontiguousarray(mat[:, band * ROWS : (band + 1) * ROWS])
        buckets: dict[bytes, list[int]] = {}
        for idx, row in enumerate(part):
            buckets.setdefault(row.tobytes(), []).append(keys[idx])
        for members in buckets.values():
            if len(members) < 2:
                continue
            if len(members) > MAX_BUCKET:
                oversize.append(len(members))
                continue
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    a, b = members[x], members[y]
                    pairs.add((a, b) if a < b else (b, a))
    return pairs, oversize


def cosine(u, v) -> float:
    return float(np.dot(u, v) / max(float(np.linalg.norm(u) * np.linalg.norm(v)), 1e-12))
