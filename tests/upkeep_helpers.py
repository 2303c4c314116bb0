"""Shared by the upkeep tests: a fixture store copied under tmp_path with its own GEODE_HOME."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FOREIGN = ["obsidian_vault", "flat", "cursor_rules", "docs_tree", "mdbook_de", "skills", "plain_notes"]
ALL_STORES = FOREIGN + ["clean"]
#: finding kinds that are broken links in the sense of EXPECTED.json's ``broken_links``
BROKEN_KINDS = {"broken-link", "signpost-stale", "broken-anchor", "missing-path"}


def expected(name: str) -> dict:
    return json.loads((FIXTURES / name / "EXPECTED.json").read_text(encoding="utf-8"))


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


def setup(name: str, tmp_path: Path, toml: str = ""):
    """(settings, engine, root, manifest) for a fixture store, records in a tmp GEODE_HOME."""
    from geode.agents.contract import ensure_tables
    from geode.delivery.config import load_settings
    from geode.delivery.models import init_db

    root, manifest = make_store(name, tmp_path / "stores")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if toml:
        (home / "geode.toml").write_text(toml, encoding="utf-8")
    settings = load_settings(store=root, home=home, env={})
    engine = init_db(settings)
    ensure_tables(engine)
    return settings, engine, root, manifest
