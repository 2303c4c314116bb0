"""The static checks the project holds itself to, run with the tests so that `.ci/run` (which
runs the README's test command) fails when any of them does: ruff's lint and its formatter, and
mypy over the package. Configuration: ``[tool.ruff]`` and ``[tool.mypy]`` in pyproject.toml.

Each check must have looked at something: a tool that examined no file is a failure, not green.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PATHS = ["geode", "tests", "bench"]


def _tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (it is in the test extra: pip install -e '.[test]')")
    return found


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)


def test_ruff_lint_is_clean():
    r = _run([_tool("ruff"), "check", "--no-cache", *PATHS])
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format_is_clean():
    r = _run([_tool("ruff"), "format", "--check", "--no-cache", *PATHS])
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"(\d+) files? already formatted", r.stdout)
    assert m and int(m.group(1)) >= 150, f"ruff format examined too few files: {r.stdout!r}"


@pytest.mark.slow
def test_mypy_is_clean(tmp_path):
    r = _run([_tool("mypy"), "--cache-dir", str(tmp_path / "mypy-cache")])
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    m = re.search(r"no issues found in (\d+) source files", r.stdout)
    assert m and int(m.group(1)) >= 100, f"mypy examined too few files: {r.stdout!r}"


def test_mypy_checks_the_bodies_of_untyped_functions(tmp_path):
    """``check_untyped_defs`` is on: an error inside a function without annotations is reported
    (at mypy's default level it is not, which is how eight of them went unseen)."""
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert cfg["check_untyped_defs"] is True
    strict = [o for o in cfg.get("overrides", []) if o.get("disallow_untyped_defs")]
    assert any("geode.kernel.config" in o["module"] for o in strict), strict
    probe = tmp_path / "probe.py"
    probe.write_text("def untyped():\n    return 1 + 'a'\n", encoding="utf-8")
    r = _run(
        [
            _tool("mypy"),
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            str(probe),
        ]
    )
    assert r.returncode == 1 and 'Unsupported operand types for + ("int" and "str")' in r.stdout, r.stdout
