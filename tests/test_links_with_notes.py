"""The no-harm gate's resolvers, made cheaply, are the ones it built from scratch (issue 8's
memory bar: the Cleaner held three resolvers over 100,000 notes at once).

- ``StoreLinks.with_notes(copy)`` equals ``StoreLinks(copy)`` field by field, for a copy with
  notes removed, replaced (a new title, new aliases, new links) and added, on every flavour
  fixture and on the bench's generated store;
- the Cleaner's resolver is offered to the gate and taken only when it is the one the gate
  would build; the Cleaner's and the Gardener's whole reports are the same with both shortcuts
  off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from geode.agents import filing
from geode.kernel.note import parse_note
from geode.kernel.store import StoreLoad, load_store
from geode.links.resolver import StoreLinks
from tests.upkeep_helpers import upkeep_bench

REPO = Path(__file__).resolve().parents[1]
FLAVOURS = REPO / "tests" / "fixtures" / "flavours"

FIELDS = (
    "root",
    "project_root",
    "moves",
    "files",
    "dirs",
    "_files_folded",
    "_by_basename",
    "by_key",
    "by_alias",
    "stems",
    "flavour",
    "is_mdbook",
    "wiki_order",
    "wiki_order_votes",
)


def _changed_copy(load: StoreLoad) -> StoreLoad:
    """The store as three kinds of proposal would leave it: one note gone, one rewritten with a
    new title, aliases and links, one created (named like an existing note)."""
    notes = {n.path: n for n in load.notes}
    paths = sorted(notes)
    assert len(paths) >= 3
    gone, edited = paths[0], paths[len(paths) // 2]
    notes.pop(gone)
    notes[edited] = parse_note(
        "---\ntitle: A New Title\naliases: [Other Name, the alias]\n---\n# Edited\n\n"
        f"Now links [[{paths[-1].rsplit('/', 1)[-1][:-3]}|that one]] and [x](missing.md).\n",
        edited,
    )
    made = "archive/" + paths[-1]
    notes[made] = parse_note(f"---\ntitle: Made\n---\n# Made\n\n[[{gone[:-3]}]] and [[A New Title]]\n", made)
    return StoreLoad(load.root, load.domain, list(notes.values()), list(load.problems), load.files_seen, load.folders)


INDEXES = ("by_key", "by_alias", "stems")


def _same(a: StoreLinks, b: StoreLinks) -> None:
    for f in FIELDS:
        if f in INDEXES:  # the paths a name stands for, in any order (readers sort or count them)
            for x in (a, b):
                assert all(len(set(v)) == len(v) > 0 for v in getattr(x, f).values()), f
            assert {k: sorted(v) for k, v in getattr(a, f).items()} == {
                k: sorted(v) for k, v in getattr(b, f).items()
            }, f
            continue
        assert getattr(a, f) == getattr(b, f), f
    assert a.notes.keys() == b.notes.keys()
    assert all(a.notes[p] is b.notes[p] for p in a.notes)


def _stores(tmp_path: Path) -> list[Path]:
    bench = upkeep_bench()
    gen = tmp_path / "generated"
    bench.generate_store(gen, 1100)
    return [gen, *sorted(p for p in FLAVOURS.iterdir() if p.is_dir())]


def test_with_notes_equals_a_fresh_build(tmp_path):
    checked = 0
    for root in _stores(tmp_path):
        load = load_store(root, "d")
        if len(load.notes) < 3:
            continue
        base = StoreLinks(load)
        copy = _changed_copy(load)
        _same(base.with_notes(copy), StoreLinks(copy))
        # and the base is left as it was (the indexes are shared, never changed in place)
        _same(base, StoreLinks(load))
        checked += 1
    assert checked >= 6


def test_with_notes_keeps_the_arguments(tmp_path):
    root = _stores(tmp_path)[0]
    load = load_store(root, "d")
    base = StoreLinks(load, moves={"area-000/old.md": "area-000/note-000001.md"}, flavour="obsidian")
    copy = _changed_copy(load)
    _same(base.with_notes(copy), StoreLinks(copy, moves=dict(base._moves_arg), flavour="obsidian"))
    assert not base.built_as_default()
    assert StoreLinks(load).built_as_default()
    assert not StoreLinks(load, flavour="plain").built_as_default()
    with pytest.raises(ValueError):
        base.with_notes(StoreLoad(str(tmp_path), "d", list(load.notes)))


def test_the_gate_takes_only_a_resolver_it_would_build(tmp_path):
    root = _stores(tmp_path)[0]
    load = load_store(root, "d")
    own = StoreLinks(load, find_project=False)  # the Cleaner's; no .git above tmp_path
    assert filing.Baseline(load, own).links is own
    assert filing.Baseline(load, StoreLinks(load, flavour="obsidian")).links is not own
    other = load_store(root, "d")
    assert filing.Baseline(other, own).links is not own  # another load: built afresh
    (root / ".git").mkdir()  # now the gate's resolver would have a project root: not the same
    assert filing.Baseline(load, own).links is not own


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["cleaner", "gardener"])
def test_reports_are_the_same_with_the_shortcuts_off(tmp_path, monkeypatch, agent):
    """The bench's store and ledger (1,500 notes, 500 a folder over a cap of 50; 30,000 rows),
    copied twice before any run: the agent on one copy as it is, on the other with the gate
    building its resolvers from scratch."""
    import shutil

    from geode.agents.upkeep import run_agent
    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    bench = upkeep_bench()
    bench.prepare(1500, 30_000, str(tmp_path / "prep"))
    for name in ("a", "b"):
        shutil.copytree(tmp_path / "prep", tmp_path / name)

    def run(name: str):
        settings = load_settings(store=tmp_path / name / "store", home=tmp_path / name / "home", env={})
        engine = init_db(settings, drain=False)
        report = run_agent(settings, engine, "r", agent)
        engine.dispose()
        assert report.status == "ok", report.message
        return (
            sorted((f.kind, f.path, f.line, f.target, f.message) for f in report.findings),
            sorted((p["kind"], tuple(p["paths"]), p["title"]) for p in report.proposals),
            report.held_back,
            report.examined,
        )

    quick = run("a")
    monkeypatch.setattr(StoreLinks, "built_as_default", lambda self: False)
    monkeypatch.setattr(StoreLinks, "with_notes", lambda self, load: StoreLinks(load))
    slow = run("b")
    assert quick == slow
    assert len(quick[1]) >= 10  # the gate had proposals to check
