"""``geode proposals ...`` end to end: real processes, a real GEODE_HOME under tmp_path, the
proposals filed through the API the agents use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geode.kernel.config import load_settings
from geode.queue import changes as CH
from geode.queue import proposals as Q
from tests.stores import NO_BACKGROUND_BUILD, snapshot, write
from tests.test_apply import _crash_in_child, draft

ROOT = Path(__file__).resolve().parent.parent


def geode(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT), "USER": "tester"})
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "geode", "proposals", *args], capture_output=True, text=True, env=e, timeout=120
    )


def ok_json(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout)


@pytest.fixture()
def home(tmp_path):
    home = tmp_path / "home"
    store = tmp_path / "store"
    store.mkdir()
    home.mkdir()
    (home / "geode.toml").write_text(f"[domains]\nmain = {json.dumps(str(store))}\n", encoding="utf-8")
    s = load_settings(home=home, env={})
    engine = Q.open_queue(s)
    write(store, "notes/old.md", b"---\nname: old\n---\nbody\n", 0o600)
    write(store, "index.md", b"- [[old]]\n")
    write(store, "b.md", b"b\n")
    ids = {
        "move": Q.file_proposal(
            s,
            engine,
            draft(
                "move",
                CH.move_changes(s, "main", "notes/old.md", "notes/new.md", rewrites={"index.md": b"- [[new]]\n"}),
            ),
        ),
        "edit": Q.file_proposal(
            s, engine, draft("edit", [CH.edit_change(s, "main", "b.md", b"B\n")], agent="corrector")
        ),
        "status": Q.file_proposal(s, engine, draft("status", [CH.status_change(s, "main", "b.md", "stable")])),
    }
    engine.dispose()
    return home, store, s, ids


@pytest.mark.slow
def test_list_and_show(home):
    h, store, s, ids = home
    d = ok_json(geode(h, "list", "--json"))
    assert [p["id"] for p in d["proposals"]] == [ids["move"], ids["edit"], ids["status"]]
    assert d["proposals"][0]["paths"] == ["notes/new.md", "index.md", "notes/old.md"]
    assert set(d["proposals"][0]) >= {"id", "agent", "kind", "domain", "title", "status", "paths", "created_at"}
    assert [p["id"] for p in ok_json(geode(h, "list", "--agent", "corrector", "--json"))["proposals"]] == [ids["edit"]]
    assert [
        p["id"] for p in ok_json(geode(h, "list", "--kind", "status", "--status", "pending", "--json"))["proposals"]
    ] == [ids["status"]]
    assert ok_json(geode(h, "list", "--domain", "nowhere", "--json"))["proposals"] == []
    p = ok_json(geode(h, "show", str(ids["move"]), "--json"))
    assert p["diff"].startswith("rename from notes/old.md\nrename to notes/new.md\n")
    assert "-- [[old]]\n+- [[new]]\n" in p["diff"]
    assert p["evidence"] == [{"finding": 1}] and p["actions"][0]["action"] == "filed"
    text = geode(h, "show", str(ids["move"]))
    assert text.returncode == 0 and "+- [[new]]" in text.stdout and "rename to notes/new.md" in text.stdout
    missing = geode(h, "show", "999")
    assert missing.returncode == 1 and "no proposal 999" in missing.stderr


@pytest.mark.slow
def test_bulk_dry_run_then_approve_undo_reject(home):
    h, store, s, ids = home
    before = snapshot(store)
    d = ok_json(geode(h, "approve", "--agent", "librarian", "--kind", "move", "--dry-run", "--json"))
    assert d["dry_run"] is True and [(r["id"], r["would"]) for r in d["results"]] == [(ids["move"], "apply")]
    assert snapshot(store) == before
    assert all(p["status"] == "pending" for p in ok_json(geode(h, "list", "--json"))["proposals"])
    assert [a["action"] for a in ok_json(geode(h, "show", str(ids["move"]), "--json"))["actions"]] == ["filed"]

    d = ok_json(geode(h, "approve", "--agent", "librarian", "--kind", "move", "--json"))
    assert [(r["id"], r["status"], r["ok"]) for r in d["results"]] == [(ids["move"], "applied", True)]
    assert (store / "notes/new.md").exists() and not (store / "notes/old.md").exists()
    after = snapshot(store)

    d = ok_json(geode(h, "undo", str(ids["move"]), "--who", "alice", "--json"))
    assert d["results"][0]["status"] == "undone" and snapshot(store) == before
    acts = ok_json(geode(h, "show", str(ids["move"]), "--json"))["actions"]
    assert [(a["action"], a["who"]) for a in acts] == [("filed", "librarian"), ("approve", "tester"), ("undo", "alice")]
    assert all(a["at"] for a in acts)
    assert after != before

    d = ok_json(geode(h, "reject", str(ids["edit"]), "--reason", "wrong", "--json"))
    assert d["results"][0]["status"] == "rejected"
    # the status proposal was made against b.md as it is: still applies, in text mode too
    r = geode(h, "approve", str(ids["status"]))
    assert r.returncode == 0 and r.stdout.strip() == f"proposal {ids['status']} approved and applied."
    assert b"status: stable" in (store / "b.md").read_bytes()


def test_conflict_exits_nonzero_and_leaves_the_file(home):
    h, store, s, ids = home
    (store / "b.md").write_bytes(b"a person's edit\n")
    r = geode(h, "approve", str(ids["edit"]), "--json")
    assert r.returncode == 1
    res = json.loads(r.stdout)["results"][0]
    assert res["status"] == "conflict" and not res["ok"] and "b.md" in res["message"]
    assert (store / "b.md").read_bytes() == b"a person's edit\n"
    r = geode(h, "undo", str(ids["edit"]))
    assert r.returncode == 1 and f"proposal {ids['edit']} was not undone: " in r.stdout
    r = geode(h, "approve")
    assert r.returncode == 2 and "bulk" in r.stderr


def test_the_next_start_reconciles_and_says_so(home):
    h, store, s, ids = home
    assert _crash_in_child(s, ids["move"], "apply", "replace", 2) == 77
    r = geode(h, "list", "--json")
    d = ok_json(r)
    rec = d["reconciled"]
    assert [(x["id"], x["outcome"], x["status"]) for x in rec] == [(ids["move"], "finished", "applied")]
    assert {f["path"]: f["found"] for f in rec[0]["files"]} == {
        "notes/new.md": "after",
        "index.md": "after",
        "notes/old.md": "before",
    }
    assert not (store / "notes/old.md").exists() and (store / "index.md").read_bytes() == b"- [[new]]\n"
    assert not list(store.rglob(".geode-*.tmp"))
    again = ok_json(geode(h, "reconcile", "--json"))
    assert again == {"reconciled": []}
