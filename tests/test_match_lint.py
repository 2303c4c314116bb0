"""``geode lint`` on match terms: too broad, never matching, duplicates under token matching,
a meaning changed from the substring rule, and terms that fire on too much of the ledger."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from geode.delivery.engine import Delivery
from geode.delivery.index import Index
from geode.delivery.lint import BROAD_MIN_ACTIONS, ledger_term_shares, lint_store
from tests.helpers import Geode


def _codes(r: dict, path: str) -> list[str]:
    return sorted(p["code"] for p in r["problems"] if p["path"] == path)


def test_broad_never_and_duplicate_terms(tmp_path):
    g = Geode(tmp_path)
    g.crystal("broad.md", "x", name="broad", match='"ls, ab"')
    g.crystal("never.md", "x", name="never", match='"# a comment"')
    g.crystal("dup.md", "x", name="dup", match='"| tail, |tail"')
    g.crystal("fine.md", "x", name="fine", match='"terraform destroy"')
    r = lint_store(g.settings())
    assert _codes(r, "broad.md").count("match-too-broad") == 3  # ls: two characters and a common word; ab
    never = [p for p in r["problems"] if p["path"] == "never.md"]
    assert {p["code"] for p in never} >= {"match-never", "match-never-fires"}
    assert any(p["severity"] == "error" for p in never)  # its only term can never match: it never fires
    assert "match-duplicate-term" in _codes(r, "dup.md")
    assert [p for p in r["problems"] if p["path"] == "fine.md" and p["severity"] != "info"] == []
    line = next(p["line"] for p in r["problems"] if p["path"] == "dup.md" and p["code"] == "match-duplicate-term")
    assert (g.store / "dup.md").read_text().splitlines()[line - 1].strip().startswith("match:")


def test_a_term_whose_meaning_changed_gets_a_message_naming_what_it_no_longer_matches(tmp_path):
    g = Geode(tmp_path)
    g.crystal("old.md", "x", name="old", match='"git add ., ssh"')
    r = lint_store(g.settings())
    changed = [p for p in r["problems"] if p["code"] == "match-meaning-changed"]
    assert (
        len(changed) == 1 and "git add ./x" in changed[0]["message"] and "substring:git add ." in changed[0]["message"]
    )
    g.crystal("old.md", "x", name="old", match='"substring:git add ., ssh"')
    assert [p for p in lint_store(g.settings())["problems"] if p["code"] == "match-meaning-changed"] == []


@pytest.mark.slow
def test_a_term_that_fires_on_most_of_the_ledgers_actions_is_flagged(tmp_path):
    from geode.records.models import init_db

    g = Geode(tmp_path)
    g.crystal("wide.md", "wide", name="wide", match='"deploy"')
    g.crystal("rare.md", "rare", name="rare", match='"terraform destroy"')
    s = g.settings()
    init_db(s).dispose()
    idx = Index(s)
    idx.ensure()
    try:
        for i in range(BROAD_MIN_ACTIONS + 5):
            d = Delivery(s, f"s{i % 3}", "main", idx)
            d.act(("bash",), "./deploy.sh prod" if i % 9 else "terraform destroy -auto-approve")
            d.flush()
            d.close()
            time.sleep(0.06)  # hook calls are separate tool calls, never within 50 ms of each other
    finally:
        idx.close()
    engine = init_db(s)
    with engine.connect() as conn:
        shares = ledger_term_shares(conn)
    engine.dispose()
    assert shares["deploy"][1] == BROAD_MIN_ACTIONS + 5  # every act call is one action
    assert shares["deploy"][0] > 0.8 and shares["terraform destroy"][0] < 0.2
    r = lint_store(s, term_shares=shares)
    assert "match-frequent" in _codes(r, "wide.md") and "match-frequent" not in _codes(r, "rare.md")


def test_the_cli_reads_the_ledger_and_summarises_changed_terms(tmp_path):
    g = Geode(tmp_path)
    g.crystal("old.md", "x", name="old", match='"git add ."')
    g.init_db()
    env = g.env()
    out = subprocess.run([sys.executable, "-m", "geode", "lint", "--json"], capture_output=True, text=True, env=env)
    data = json.loads(out.stdout)
    assert data["examined"]["ledger_terms"] == 0
    assert any(p["code"] == "match-meaning-changed" for p in data["problems"])
    text = subprocess.run([sys.executable, "-m", "geode", "lint"], capture_output=True, text=True, env=env).stdout
    assert "1 match term(s)" in text and "--verbose" in text
