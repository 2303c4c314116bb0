"""Link-finding precision and recall of the Librarian on each flavour fixture against its hand
count (tests/fixtures/flavours/<name>/EXPECTED.json).

    PYTHONPATH=. python -m bench.flavour_links            # this tree's geode
    PYTHONPATH=/path/to/other/checkout python bench/flavour_links.py tests/fixtures/flavours

A finding is a link finding unless it is an ``orphan`` or a ``cannot-read`` (said once per
construct, counted apart). Precision: the link findings that the hand count lists; recall: the
hand-counted broken links found. Prints the markdown table docs/UPKEEP.md holds.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

NOT_LINKS = {"orphan", "cannot-read"}


def measure(fixture: Path) -> dict:
    from geode.agents.upkeep import run_agent
    from tests.stores import GeodeEnv

    exp = json.loads((fixture / "EXPECTED.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "stores" / fixture.name
        shutil.copytree(fixture, dest, ignore=shutil.ignore_patterns("EXPECTED*.json"))
        root = dest
        if (dest / "docs").is_dir():
            root = dest / "docs"
        if (dest / ".cursor" / "rules").is_dir():
            root = dest / ".cursor" / "rules"
            (dest / ".git").mkdir()
        settings, engine, _root = GeodeEnv(Path(tmp), root=root)
        rep = run_agent(settings, engine, "bench", "librarian")
    truth = {(p, ln, t) for k, p, ln, t in exp["findings"] if k not in NOT_LINKS}
    found = {(f.path, f.line, f.target) for f in rep.findings if f.kind not in NOT_LINKS}
    hit = len(truth & found)
    said = re.search(r"flavour [^:;]+: ([\w-]+) \(", rep.message)
    flavour = said.group(1) if said else "?"
    return {
        "fixture": fixture.name,
        "flavour": flavour,
        "truth": len(truth),
        "found": len(found),
        "precision": hit / len(found) if found else 1.0,
        "recall": hit / len(truth) if truth else 1.0,
        "cannot_read": sum(1 for f in rep.findings if f.kind == "cannot-read"),
        "cannot_read_expected": sum(1 for f in exp["findings"] if f[0] == "cannot-read"),
    }


def main(argv: list[str]) -> int:
    base = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "tests/fixtures/flavours"
    print("| fixture | detected | broken (hand count) | link findings | precision | recall | cannot-read (expected) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for fx in sorted(p for p in base.iterdir() if (p / "EXPECTED.json").exists()):
        m = measure(fx.resolve())
        print(
            f"| {m['fixture']} | {m['flavour']} | {m['truth']} | {m['found']} | {m['precision']:.2f} | "
            f"{m['recall']:.2f} | {m['cannot_read']} ({m['cannot_read_expected']}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
