"""Run the ``geode`` program with the apply loop's seam set: ``python -m tests.apply_seam
[--pause S] [--gate PATH] -- ARGV...`` is ``geode ARGV...`` in its own process, with
``geode.queue.apply.before_file`` replaced before the program starts.

Why a runner and not a switch: the fault and race tests drive real ``geode`` processes and must
hold one at a known point of its apply, but product code reads no test-only environment
variable. So the test's process starts the program through this module, which sets the seam
(a module-level function the apply loop calls before each file) and then runs ``main``:

- ``--pause S``: sleep ``S`` seconds before each file (a race gets a window to hit);
- ``--gate PATH``: before the middle file, create ``PATH.reached`` (holding the pid) and wait
  up to 120 s for ``PATH`` to exist (the test decides when the apply goes on).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(*argv: str, pause: float | None = None, gate: Path | str | None = None) -> list[str]:
    """The command line that runs ``geode argv...`` through this runner (PYTHONPATH: the checkout)."""
    seam = [*(["--pause", str(pause)] if pause else []), *(["--gate", str(gate)] if gate is not None else [])]
    return [sys.executable, "-m", "tests.apply_seam", *seam, "--", *argv]


def seam(pause: float | None, gate: str | None):
    """The ``before_file`` the options ask for."""

    def before_file(i: int, n: int) -> None:
        if pause:
            time.sleep(pause)
        if gate and i == n // 2:
            with open(gate + ".reached", "w", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")
            deadline = time.monotonic() + 120
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.005)

    return before_file


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.apply_seam")
    parser.add_argument("--pause", type=float, default=None)
    parser.add_argument("--gate", default=None)
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    from geode.program.main import main
    from geode.queue import apply

    apply.before_file = seam(args.pause, args.gate)
    return main(program)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
