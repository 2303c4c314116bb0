"""Shared by the upkeep tests: a fixture store copied under tmp_path with its own GEODE_HOME."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

from tests.stores import GeodeEnv

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FOREIGN = ["obsidian_vault", "flat", "cursor_rules", "docs_tree", "mdbook_de", "skills", "plain_notes"]
ALL_STORES = FOREIGN + ["clean"]
#: finding kinds that are broken links in the sense of EXPECTED.json's ``broken_links``
BROKEN_KINDS = {"broken-link", "signpost-stale", "broken-anchor", "missing-path", "broken-mention"}


#: where each agent's hand-counted expectations for a fixture store are kept (outside the store
#: folder for the Cleaner and the Corrector: a file inside a fixture is copied with it)
EXPECTED_FILES = {
    "librarian": "{name}/EXPECTED.json",
    "cleaner": "cleaner_expected/{name}.json",
    "gardener": "{name}/EXPECTED_GARDENER.json",
    "corrector": "corrector_expected/{name}.json",
}


def expected_of(agent: str, name: str) -> dict:
    """``agent``'s hand-counted expectations for fixture store ``name``."""
    return json.loads((FIXTURES / EXPECTED_FILES[agent].format(name=name)).read_text(encoding="utf-8"))


def expected(name: str) -> dict:
    """The Librarian's (EXPECTED.json), the first written and the one most tests read."""
    return expected_of("librarian", name)


def make_store(name: str, dest: Path) -> tuple[Path, dict]:
    """Copy (or generate) fixture ``name`` into ``dest/name``; returns (store root, manifest)."""
    root = dest / name
    manifest: dict = {}
    if name == "flat":
        sys.path.insert(0, str(FIXTURES))
        try:
            from make_flat import make_flat
        finally:
            sys.path.remove(str(FIXTURES))
        manifest = make_flat(root)
    else:
        shutil.copytree(FIXTURES / name, root, ignore=shutil.ignore_patterns("EXPECTED*.json"))
    return root, manifest


def fixture_env(name: str, tmp_path: Path, toml: str = "") -> tuple[GeodeEnv, dict]:
    """Fixture ``name`` as a store (``tmp_path/stores/name``) with its GEODE_HOME
    (``tmp_path/home``, ``geode.toml`` from ``toml``); returns (the GeodeEnv, the manifest)."""
    root, manifest = make_store(name, tmp_path / "stores")
    env = GeodeEnv(tmp_path, root=root)
    if toml:
        env.toml(toml)
    return env, manifest


def setup(name: str, tmp_path: Path, toml: str = ""):
    """(settings, engine, root, manifest) for a fixture store, records in a tmp GEODE_HOME."""
    env, manifest = fixture_env(name, tmp_path, toml)
    settings, engine, root = env
    return settings, engine, root, manifest


def upkeep_bench():
    """``bench/upkeep_all.py`` as a module: the tests build its store to check that a shortcut
    gives the same answers on the very notes the benchmark measures."""
    spec = importlib.util.spec_from_file_location(
        "bench_upkeep_all", FIXTURES.parent.parent / "bench" / "upkeep_all.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
