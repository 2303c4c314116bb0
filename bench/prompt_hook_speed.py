"""The prompt hook's text fallback at 1,000 / 10,000 / 100,000 notes, before and after, in one run.

    PYTHONPATH=. .venv/bin/python bench/prompt_hook_speed.py [--sizes 1000,10000,100000]
        [--rounds 5] [--before REV] [--out FILE]

What: ``geode.delivery.prompt_recall.text_search`` (what the UserPromptSubmit hook answers with
when no warm ``geode serve`` answers), in process, over the 20 queries of
``bench/recall_speed.py`` x ``--rounds``, on that bench's Zipf stores (``--store zipf``: a query
word in 0.1 % to 25 % of the notes, as in real notes; generated once into ``bench/out/stores/``,
indexed once into ``bench/out/recall/zipf-n<N>/``). Wall median and p95, and CPU median, of this
checkout's fallback and of the one at ``--before`` (default ``main``: its ``prompt_recall.py``
read with ``git show`` and loaded beside this one), interleaved query by query so that both see
the same load. Also: how often the two return the same first note, and the load average.

The index is the one the refresh builds (``recall_word`` included; the before side, which does
not read it, is unaffected by it). How close the fallback's first note is to ``geode search``'s
(text mode): ``first_note_as_search``, on the 20 queries at each size (and in
tests/test_prompt_fallback_bounded.py's differential).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def load_before(rev: str):
    src = subprocess.run(
        ["git", "show", f"{rev}:geode/delivery/prompt_recall.py"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    path = os.path.join(tempfile.mkdtemp(prefix="geode-prompt-before-"), "prompt_recall_before.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(src)
    spec = importlib.util.spec_from_file_location("prompt_recall_before", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def store_settings(n: int):
    from bench.recall_speed import OUT, generate_zipf_store
    from geode.kernel.config import load_settings
    from geode.recall.recall_index import RecallIndex

    m = generate_zipf_store(n)
    home = os.path.join(OUT, f"zipf-n{n}")
    os.makedirs(home, exist_ok=True)
    s = load_settings(store=m["root"], home=home)
    idx = RecallIndex(s)
    if idx.counts()["notes"] != n:
        idx.wipe()
    idx.refresh()  # an index from before ``recall_word`` gets its word counts (nothing else changes)
    return s


def main(argv=None) -> int:
    from bench.recall_speed import QUERIES, ms, pct
    from geode.delivery import prompt_recall as after

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--before", default="main")
    p.add_argument("--out", default=os.path.join(REPO, "bench", "out", "prompt_hook_speed.json"))
    a = p.parse_args(argv)
    before = load_before(a.before)
    res: dict = {"before": a.before, "load_before": os.getloadavg(), "sizes": []}
    for n in [int(x) for x in a.sizes.split(",")]:
        s = store_settings(n)
        for q in QUERIES[:3]:  # warm the page cache for both
            before.text_search(s, q)
            after.text_search(s, q)
        walls: dict = {"before": [], "after": []}
        cpus: dict = {"before": [], "after": []}
        same = answered = 0
        for _ in range(a.rounds):
            for q in QUERIES:
                got = {}
                for name, mod in (("before", before), ("after", after)):
                    c0, t0 = time.process_time(), time.perf_counter()
                    got[name] = mod.text_search(s, q)
                    walls[name].append(time.perf_counter() - t0)
                    cpus[name].append(time.process_time() - c0)
                if got["before"] and got["after"]:
                    answered += 1
                    same += got["before"][0]["path"] == got["after"][0]["path"]
        row: dict = {"notes": n, "same_first_note": f"{same}/{answered}"}
        # the first note against full recall's text side (``geode search --mode text``, its first)
        from geode.recall.search import search

        agree: dict = {"before": [0, 0], "after": [0, 0]}
        for q in QUERIES:
            full = search(s, q, mode="text", limit=3)["results"]
            for name, mod in (("before", before), ("after", after)):
                mine = mod.text_search(s, q)
                if full and mine:
                    agree[name][1] += 1
                    agree[name][0] += mine[0]["path"] == full[0]["path"]
        row["first_note_as_search"] = {k: f"{v[0]}/{v[1]}" for k, v in agree.items()}
        for name in ("before", "after"):
            row[name] = ms(walls[name])
            row[name]["cpu_median_ms"] = round(sorted(cpus[name])[len(cpus[name]) // 2] * 1000, 2)
            row[name]["cpu_p95_ms"] = round(pct(cpus[name], 95) * 1000, 2)
        res["sizes"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    res["load_after"] = os.getloadavg()
    base = {k: res["sizes"][0][k]["median_ms"] for k in ("before", "after")}
    res["ratio_to_smallest"] = [
        {"notes": r["notes"], **{k: round(r[k]["median_ms"] / base[k], 2) for k in base}} for r in res["sizes"]
    ]
    print(json.dumps(res, indent=1))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
