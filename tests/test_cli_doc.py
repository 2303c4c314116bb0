"""docs/CLI.md is the parser's help, generated; this fails when a command or option changed and
the file was not regenerated (`python -m geode.program.doc > docs/CLI.md`)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from geode.program.doc import commands, render
from geode.program.main import build_parser

ROOT = Path(__file__).resolve().parent.parent


def test_docs_cli_md_is_the_generated_help():
    on_disk = (ROOT / "docs" / "CLI.md").read_text(encoding="utf-8")
    assert on_disk == render(), "docs/CLI.md is out of date: run `python -m geode.program.doc > docs/CLI.md`"


def test_every_command_is_in_the_reference_and_every_option_says_what_it_does():
    text = render()
    found = list(commands(build_parser()))
    assert len(found) >= 25
    for path, parser, _line in found:
        assert f"## geode {' '.join(path)}\n" in text
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction) or a.help == argparse.SUPPRESS:
                continue
            assert a.help, f"geode {' '.join(path)}: {a.option_strings or a.dest} has no help text"


def test_the_generator_runs_as_documented():
    r = subprocess.run(
        [sys.executable, "-m", "geode.program.doc"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "40"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == render()  # the terminal's width does not leak into the file
