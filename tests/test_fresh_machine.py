"""The README's test command on a fresh machine (issue 24): ``scripts/test`` provides what the
suite needs (Chromium, PostgreSQL, Redis, torch's CPU build) or, where it cannot, says so on one
line and the tests that need the missing part are skipped with that line, never a collection
error (which stopped the whole run at exit 2 with no test run).

The absent browser is simulated with ``GEODE_CHROMIUM`` naming no file and
``GEODE_TESTS_NO_INSTALL=1`` (a machine without root or apt-get): the real script and a real
pytest run of a real browser test, nothing mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "test"


def _setup(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_TESTS_")}
    e.update(GEODE_CHROMIUM=str(tmp_path / "no-such-chromium"), GEODE_TESTS_NO_INSTALL="1", **env)
    return subprocess.run([str(SCRIPT), "--setup-only"], cwd=REPO, env=e, capture_output=True, text=True, timeout=120)


def test_without_a_browser_the_setup_says_so_and_the_browser_tests_skip_with_that_line(tmp_path):
    run = _setup(tmp_path)
    assert run.returncode == 0, run.stderr
    missing = tmp_path / "no-such-chromium"
    assert f"GEODE_CHROMIUM={missing} is not an executable" in run.stderr, run.stderr
    assert "apt-get install chromium" in run.stderr, run.stderr
    skip = run.stdout.strip().splitlines()[-1]
    assert skip.startswith("GEODE_TESTS_SKIP=") and "browser" in skip.split("=", 1)[1].split(","), run.stdout

    # the suite run as the script runs it: the browser test skipped with one line, the rest runs
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_TESTS_")}
    env.update(GEODE_CHROMIUM=str(missing), GEODE_TESTS_SKIP=skip.split("=", 1)[1])
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--no-header"]
    argv += ["tests/test_web_browser.py::test_search_a_note_and_its_graph"]
    argv += ["tests/test_web_units.py::test_changed_words_are_marked_and_a_hyphenated_name_is_one_word"]
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text  # 2 would be a collection error, 1 a failed test
    assert "1 passed, 1 skipped" in text, text
    assert f"browser missing on this machine, skipped: {missing} is missing" in text, text
    assert "RuntimeError" not in text and " error" not in text, text


def test_strict_ci_never_skips_a_missing_browser(tmp_path):
    """CI (``GEODE_TESTS_STRICT=1``): the same machine declares nothing skippable, so the browser
    tests fail naming the package (tests/test_web_browser.py's last test shows the failure)."""
    run = _setup(tmp_path, GEODE_TESTS_STRICT="1")
    assert run.returncode == 0, run.stderr
    assert "its tests will fail, not skip" in run.stderr, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "GEODE_TESTS_SKIP=", run.stdout


def test_ci_and_readme_run_the_same_script():
    """One command: .ci/run calls scripts/test (strict), and README's test command is scripts/test."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "GEODE_TESTS_STRICT=1 exec scripts/test" in ci, ci
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "\nscripts/test\n" in readme
    assert "download.pytorch.org/whl/cpu" in readme and "torch==2.13.0" in readme


@pytest.mark.services  # imports torch
def test_the_installed_torch_is_the_cpu_build():
    """No CUDA build (about 20 nvidia wheels) came in with the test extra."""
    from importlib import metadata

    import torch

    assert torch.version.cuda is None, torch.__version__
    nvidia = sorted(
        d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"].lower().startswith("nvidia")
    )
    assert nvidia == [], nvidia


# -- PostgreSQL and Redis absent: the apt-get path (issue 24's remainder) ------------------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bare_machine(tmp_path: Path, uid: int) -> tuple[dict, Path]:
    """An environment whose PATH holds only the tools the set-up needs to run, with ``id`` saying
    ``uid`` and an ``apt-get`` that records its arguments and installs nothing: no
    ``pg_ctlcluster``, ``psql`` or ``redis-server``, ports where nothing answers, no clusters."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("dirname", "ls", "head", "seq", "sleep", "sed", "mkdir"):
        real = next((Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists()), None)
        assert real is not None, f"{tool} is not on this machine"
        (bin_ / tool).symlink_to(real)
    log = tmp_path / "apt.log"
    (bin_ / "id").write_text(f'#!/bin/sh\n[ "$1" = -u ] && echo {uid} && exit 0\nexit 1\n')
    (bin_ / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    for f in ("id", "apt-get"):
        (bin_ / f).chmod(0o755)
    (tmp_path / "etc-postgresql").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_TESTS_")}
    env.update(
        PATH=str(bin_),
        GEODE_CHROMIUM=sys.executable,  # a browser "is there": this test is about the services
        GEODE_TESTS_PG_PORT=str(_free_port()),
        GEODE_TESTS_REDIS_PORT=str(_free_port()),
        GEODE_TESTS_PG_ETC=str(tmp_path / "etc-postgresql"),
    )
    return env, log


def _run_setup(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/bin/bash", str(SCRIPT), "--setup-only"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def test_as_root_with_apt_and_no_services_the_setup_installs_them_by_name(tmp_path):
    env, log = _bare_machine(tmp_path, uid=0)
    run = _run_setup(env)
    assert run.returncode == 0, run.stderr
    assert "installing postgresql (apt-get)" in run.stderr, run.stderr
    assert "installing redis-server (apt-get)" in run.stderr, run.stderr
    calls = log.read_text().splitlines()
    assert calls == ["update -q", "install -y -q postgresql", "install -y -q redis-server"], calls
    # this apt-get installed nothing: each is then named with how to get it, and skipped
    assert f"not answering on 127.0.0.1:{env['GEODE_TESTS_PG_PORT']}" in run.stderr, run.stderr
    assert "apt-get install redis-server" in run.stderr, run.stderr
    skip = run.stdout.strip().splitlines()[-1]
    assert skip == "GEODE_TESTS_SKIP=postgres,redis", run.stdout


@pytest.mark.parametrize(("uid", "extra"), [(1000, {}), (0, {"GEODE_TESTS_NO_INSTALL": "1"})])
def test_without_root_or_with_no_install_the_setup_installs_nothing_and_says_what_to_install(tmp_path, uid, extra):
    env, log = _bare_machine(tmp_path, uid=uid)
    run = _run_setup(env | extra)
    assert run.returncode == 0, run.stderr
    assert not log.exists(), log.read_text()  # apt-get never ran
    assert "installing" not in run.stderr, run.stderr
    assert "install it (`apt-get install postgresql`" in run.stderr, run.stderr
    assert "install it (`apt-get install redis-server`)" in run.stderr, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "GEODE_TESTS_SKIP=postgres,redis", run.stdout
