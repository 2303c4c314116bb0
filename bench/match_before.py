"""The labelled sets judged by another checkout's matcher: the "before" column of
``bench/MATCHING.md`` for a change to the matching rules.

Run with the other checkout first on the path, e.g. the code before the term grammar:
``PYTHONPATH=/path/to/old/checkout python bench/match_before.py tests/fixtures/matching_cases_grammar.txt``.
Terms are lower-cased before compiling, as that code's ``binding.split_terms`` gave them; the
engine fires exactly where ``match.term_matches`` does (tests/test_match_delivery.py), so the
rule is called directly. Prints the scores and each case whose verdict is wrong.
"""

from __future__ import annotations

import os
import sys

from geode.delivery import match

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(HERE)  # the labelled-set reader of this tree, after the checkout under test

from tests.matching_cases import load_cases  # noqa: E402


def main(argv: list[str]) -> int:
    path = argv[0] if argv else os.path.join(HERE, "tests", "fixtures", "matching_cases.txt")
    cases, _sources = load_cases(path)
    tp = fp = fn = tn = 0
    for c in cases:
        got = match.term_matches(c.term.lower(), (c.action,), c.text)
        if got and c.fire:
            tp += 1
        elif got:
            fp += 1
            print(f"false fire: {c!r}")
        elif c.fire:
            fn += 1
            print(f"missed: {c!r}")
        else:
            tn += 1
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / (tp + fn) if tp + fn else float("nan")
    print(
        f"{match.__file__}: {len(cases)} cases  precision {prec:.3f}  recall {rec:.3f}  TP {tp} FP {fp} FN {fn} TN {tn}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
