"""The Gardener on every foreign-store fixture, with a small synthetic ledger: the exact
counts it examines, finds and proposes (``EXPECTED_GARDENER.json``, counted by hand), its
proposals applied and undone byte-exactly, and a rerun that files nothing again."""

from __future__ import annotations

import pytest

from geode.agents.upkeep import run_agent
from geode.queue import apply
from tests.test_gardener import DAY, END, Ledger, after_bytes, age_files, binding_of, filed, snapshot
from tests.upkeep_helpers import ALL_STORES, expected_of, setup


def expected(name: str) -> dict:
    return expected_of("gardener", name)


def first_unbound(root) -> str:
    from geode.kernel.store import load_store

    load = load_store(root)
    return sorted(n.path for n in load.notes if "crystal" not in n.frontmatter)[0]


def synthetic_ledger(settings, root, domain: str) -> None:
    L = Ledger(settings, root)
    for i in range(25):
        L.delivered(END - 35 * DAY + i * 35 * DAY / 24, f"d{i}", "elsewhere:ci.md", term="| tail")
    t = END - 2 * DAY
    L.blocked(t, "s-a", "grep -rn release {root}")["domain"] = domain
    L.blocked(t + 10, "s-b", 'rg "release|changelog" {root}')["domain"] = domain
    L.blocked(t + 20, "s-c")["domain"] = domain  # a row from before the hook kept commands
    target = first_unbound(root)
    for i in range(3):
        L.delivered(t + 100 + i * 100, f"q{i}", "elsewhere:ci.md", term="make test")
        ev = L.searched(t + 130 + i * 100, f"q{i}", "how to release", [target])
        ev["detail"] = ev["detail"].replace('"main:', f'"{domain}:')
        ev["domain"] = domain
    L.write()


@pytest.mark.parametrize("name", ALL_STORES)
def test_gardener_on_each_fixture_counts_apply_undo_rerun(name, tmp_path):
    exp = expected(name)
    settings, engine, root, _ = setup(name, tmp_path)
    (root / "EXPECTED_GARDENER.json").unlink(missing_ok=True)
    age_files(root)
    synthetic_ledger(settings, root, name)
    before = snapshot(root)

    report = run_agent(settings, engine, "night-1", "gardener")
    assert report.status == "ok", report.message
    assert report.store_notes == exp["examined"]["notes"]
    for key, value in exp["examined"].items():
        assert report.examined.get(key, 0) == value, (key, report.examined)
    kinds: dict[str, int] = {}
    for f in report.findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    assert kinds == exp["findings"]
    assert len(report.proposals) == len(exp["proposals"])
    got = []
    for p in filed(engine, "night-1"):
        [(path, _b, after)] = after_bytes(engine, p["id"])
        if p["kind"] == "status":
            from geode.kernel.note import parse_note

            got.append([p["kind"], path, parse_note(after.decode("utf-8"), path).status])
        else:
            b, _note = binding_of(after, path)
            got.append([p["kind"], path, list(b.terms)])
        assert p["evidence"] and all("finding" in e or "ledger_event" in e for e in p["evidence"])
    assert sorted(got) == sorted(exp["proposals"])

    for p in report.proposals:
        res = apply.approve(settings, engine, p["id"], "tester")
        assert res["ok"], res
    assert (root / "stubs/lookup-release-changelog.md").exists()
    again = run_agent(settings, engine, "night-2", "gardener")
    assert again.status == "ok" and again.proposals == []
    for p in reversed(report.proposals):
        res = apply.undo(settings, engine, p["id"], "tester")
        assert res["ok"], res
    assert snapshot(root) == before
