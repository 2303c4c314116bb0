"""The geode tree a benchmark measures: this checkout, or ``--code DIR`` (an older tree, from
``git archive <commit> geode | tar -x -C DIR``), for a baseline measured in the same run.

Why a module: the tree must come first on ``sys.path`` before anything imports ``geode``, so each
benchmark calls :func:`measured_tree` at the top, before its own geode imports; three
benchmarks carried the same loop over ``sys.argv`` (argparse runs too late for it).
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measured_tree(argv: list[str] | None = None) -> str:
    """The folder whose ``geode`` is measured (``--code DIR`` in ``argv``, else this checkout),
    put first on ``sys.path``; the checkout stays on the path after it, for ``bench`` itself."""
    args = sys.argv if argv is None else argv
    code = REPO
    for i, a in enumerate(args):
        if a == "--code" and i + 1 < len(args):
            code = os.path.abspath(args[i + 1])
    if REPO not in sys.path:
        sys.path.append(REPO)
    sys.path.insert(0, code)
    return code
