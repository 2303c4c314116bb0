"""Walks that cannot see (issue 15, point 4): a folder the walk cannot enter (``chmod 000``, run
as an unprivileged user) and a symlinked folder pointing outside the store. Before, upkeep said
"examined 3 (the store holds 3)", every agent ok, doctor green, lint clean (only lint warned
about the symlink). Now the census counts every folder it could not see into, the contract fails
the run, doctor fails and lint reports an error, as they do for an unreadable file.

Root reads a ``chmod 000`` folder anyway, so when the tests run as root the commands run as
``nobody`` (uid 65534) through util-linux's ``setpriv``, with a home that user owns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from geode.agents import contract
from geode.kernel import store as S
from tests.stores import NO_BACKGROUND_BUILD, plain_settings, write

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534


def _note(root: Path, rel: str, i: int) -> None:
    write(root, rel, f"---\nname: note {rel}\ndescription: note number {i}\n---\n# Note {i}\n\nbody {i}\n")


def _geode(home: Path, *args: str, user: int | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT), "USER": "tester", "HOME": str(home)})
    prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user is not None else []
    return subprocess.run(
        [*prefix, sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=env, timeout=300
    )


def _everything_fails(top: Path, store: Path, hidden: str, user: int | None) -> None:
    home = top / "home"
    home.mkdir()
    if user is not None:
        os.chown(home, user, user)
    up = _geode(home, "upkeep", "--store", str(store), "--json", user=user)
    assert up.returncode != 0, up.stdout + up.stderr
    runs = json.loads(up.stdout)["runs"]
    assert len(runs) == 4
    for run in runs:
        assert run["status"] == "failed", run
        assert "cannot see into 1 folder" in run["message"] and hidden in run["message"], run["message"]
        assert run["store_notes"] == 3 and run["examined"]["unentered"] == 1
    doc = _geode(home, "doctor", "--store", str(store), "--json", "--skip-model", "--home-dir", str(home), user=user)
    data = json.loads(doc.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert doc.returncode == 1 and data["ok"] is False
    assert not checks["store"]["ok"] and hidden in checks["store"]["message"]
    for name in ("agent:librarian", "agent:cleaner", "agent:gardener", "agent:corrector"):
        assert not checks[name]["ok"] and hidden in checks[name]["message"], checks[name]
    lint = _geode(home, "lint", "--store", str(store), "--json", user=user)
    assert lint.returncode == 1, lint.stdout + lint.stderr
    problems = [p for p in json.loads(lint.stdout)["problems"] if p["path"] == hidden]
    assert [p["severity"] for p in problems] == ["error"], problems
    assert "not seen" in problems[0]["message"]


@pytest.mark.slow
def test_an_unreadable_folder_fails_upkeep_doctor_and_lint():
    user = NOBODY if os.geteuid() == 0 else None  # root would read the folder anyway
    with tempfile.TemporaryDirectory(prefix="geode-blind-") as t:
        top = Path(t)
        os.chmod(top, 0o755)
        store = top / "S"
        for i in range(3):
            _note(store, f"n{i}.md", i)
        for i in range(30):
            _note(store, f"team/t{i:02d}.md", i)
        os.chmod(store / "team", 0o000)
        try:
            _everything_fails(top, store, "team", user)
        finally:
            os.chmod(store / "team", 0o755)


@pytest.mark.slow
def test_a_symlinked_folder_outside_the_store_fails_upkeep_doctor_and_lint(tmp_path):
    store, far = tmp_path / "S", tmp_path / "elsewhere"
    for i in range(3):
        _note(store, f"n{i}.md", i)
    for i in range(55):
        _note(far, f"f{i:02d}.md", i)
    os.symlink(far, store / "far")
    _everything_fails(tmp_path, store, "far", None)


def _team_unlistable(tmp_path, monkeypatch, os_module):
    """A store ``S`` of two notes whose ``team/`` folder cannot be listed through ``os_module``
    (the listing made to fail with EACCES, since root reads anything)."""
    store = tmp_path / "S"
    _note(store, "a.md", 1)
    _note(store, "team/b.md", 2)
    real = os.scandir

    def scandir(path):
        if os.fspath(path).endswith("/team"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os_module, "scandir", scandir)
    return store


def test_the_census_and_the_walk_name_what_they_cannot_enter(tmp_path, monkeypatch):
    """In process: the walk's error handler is called for a folder that cannot be listed (the
    listing made to fail, since root reads anything), and the census carries it."""
    store = _team_unlistable(tmp_path, monkeypatch, S.os)
    seen: list = []
    assert [d for d, _dirs, _files in S.walk(store, lambda p, e: seen.append((p, e.errno)))] == [str(store)]
    assert seen == [(str(store / "team"), 13)]
    counted = contract.census(plain_settings(tmp_path / "home", store))
    assert counted.notes == 1 and len(counted.unentered) == 1 and "team" in counted.unentered[0]
    rep = contract.apply_rule(contract.Report(agent="x", examined={"notes": 1}), counted)
    assert rep.status == contract.FAILED and "cannot see into 1 folder" in rep.message


def test_the_hook_index_counts_a_folder_it_cannot_enter(tmp_path, monkeypatch):
    """The binding index (the hook's walk) stays fail-open but counts the folder among its
    problems instead of dropping it silently."""
    from geode.delivery import index as I

    store = _team_unlistable(tmp_path, monkeypatch, I.os)
    idx = I.Index(plain_settings(tmp_path / "home", store))
    try:
        counts = idx.build()
    finally:
        idx.close()
    assert counts["files"] == 1 and counts["unentered"] == 1 and counts["problems"] >= 1
