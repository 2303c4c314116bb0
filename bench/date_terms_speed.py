"""What the date terms cost at index time: ``index_terms`` against the whole of ``note_rows`` (which
calls it), on the same notes in the same run (issue 26, bench/RECALL.md, Round 6b).

    PYTHONPATH=. .venv/bin/python bench/date_terms_speed.py [--rounds 3] [--reps 5]

The notes of six evaluation sets (longmem, longmem-test, crossling, crossling-test, dates, spread)
are written to a temporary store, read once, and then turned into index rows ``--reps`` times
per round; CPU time (``time.process_time``) a note, for both, and the share.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.recall_eval import SETS, load_notes  # noqa: E402
from geode.kernel.store import read_note_file  # noqa: E402
from geode.recall.date_terms import index_terms  # noqa: E402
from geode.recall.note_rows import note_rows  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args(argv)
    notes = {}
    for s in ("longmem", "longmem-test", "crossling", "crossling-test", "dates", "spread"):
        for k, v in load_notes(os.path.join(SETS[s], "notes.txt")).items():
            notes[f"{s}/{k}"] = v
    with tempfile.TemporaryDirectory() as d:
        for rel, text in notes.items():
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        parsed = [read_note_file(d, rel, 10**7, "main") for rel in notes]
        for rnd in range(a.rounds):
            t0 = time.process_time()
            for _ in range(a.reps):
                for n in parsed:
                    note_rows(n, "main", d, 0, 0)
            t1 = time.process_time()
            for _ in range(a.reps):
                for n in parsed:
                    index_terms(n.frontmatter, n.title, n.path, n.body)
            t2 = time.process_time()
            per = 1000.0 / a.reps / len(parsed)
            print(
                f"round {rnd}: {len(parsed)} notes x {a.reps}: note_rows {(t1 - t0) * per:.3f} ms a note (CPU), "
                f"of it index_terms {(t2 - t1) * per:.3f} ms ({(t2 - t1) / (t1 - t0):.0%})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
