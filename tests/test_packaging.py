"""One import name: ``pip install .`` puts exactly one top-level package, ``geode``, into
site-packages (issue 13: ``agents`` is also the import name of a widely used agents SDK, and
``delivery``, ``scheduler``, ... are names any project may use).

The check installs the checkout for real (non-editable, into a temporary target) and reads what
landed, then runs the installed hook entry point with ``-S`` the way the installer writes it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO


def _install(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    # a copy, so the build's own folders (build/, *.egg-info) never land in the checkout
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis"
        ),
    )
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


@pytest.mark.slow
def test_install_puts_one_top_level_package_and_the_hook_runs_from_it(tmp_path):
    target = _install(tmp_path)
    tops = sorted(p.name for p in target.iterdir() if p.name != "bin" and not p.name.endswith(".dist-info"))
    assert tops == ["geode"], tops
    dist = next(target.glob("geode-*.dist-info"))
    record = (dist / "RECORD").read_text(encoding="utf-8").splitlines()
    roots = {line.split(",")[0].split("/")[0] for line in record}
    assert roots - {dist.name, "bin", ".."} == {"geode"}, roots
    # every room is in it, and the starter notes travel as package data
    # every room of the checkout lands, new folders included
    rooms = [d.name for d in sorted((REPO / "geode").iterdir()) if (d / "__init__.py").is_file()]
    assert {"kernel", "records", "delivery", "queue", "links", "install", "cli", "mcp"} <= set(rooms), rooms
    for room in rooms:
        assert (target / "geode" / room / "__init__.py").is_file(), room
    assert len(list((target / "geode" / "delivery" / "starter").glob("*.md"))) >= 5
    demo = sorted(p.name for p in (REPO / "geode" / "delivery" / "starter" / "demo").glob("*.md"))
    assert demo and sorted(p.name for p in (target / "geode" / "delivery" / "starter" / "demo").glob("*.md")) == demo
    # the records migrations travel too (revisions, env.py, the template) and run from the install
    mig = target / "geode" / "records" / "migrations"
    assert (mig / "env.py").is_file() and (mig / "script.py.mako").is_file()
    assert (mig / "versions" / "0001_baseline.py").is_file()

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(target), "HOME": str(tmp_path)}
    for name in ("agents", "delivery", "librarian", "cleaner", "gardener", "corrector", "scheduler"):
        r = subprocess.run(
            [sys.executable, "-c", f"import {name}"], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, (name, r.stderr)
    probe_db = (
        "from geode.records import migrations, models; from geode.kernel.config import load_settings; "
        "e = models.engine_for(load_settings()); "
        "print(migrations.__file__, migrations.upgrade_to_head(e), migrations.current_heads(e))"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe_db],
        env={**env, "GEODE_HOME": str(tmp_path / "dbhome")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    where, done, heads = r.stdout.split(" ", 2)
    from geode.records.migrations import HEAD  # the newest revision: the install must reach it, not only the first

    assert where.startswith(str(target)) and done == "created" and HEAD in heads, r.stdout
    hookmain = target / "geode" / "delivery" / "hookmain.py"
    probe = json.dumps({"hook_event_name": "Probe"})
    r = subprocess.run(
        [sys.executable, "-S", str(hookmain), "claude"],
        input=probe,
        env={"HOME": str(tmp_path), "GEODE_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
