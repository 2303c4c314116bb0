"""The queue page's first paint in a real Chromium at 5,000 proposals over 10,000 notes.

A test held this figure to a bound once (``best < 5000`` ms); on a shared two-core machine a
timing is a measurement, not a contract, so the test now asserts only what the pages show
(``tests/test_web_browser.py``) and this script measures: it builds the queue
(``tests.web_helpers.big_queue``), starts a real ``geode web`` on it, loads ``/queue``
``--runs`` times and prints the browser's ``first-contentful-paint`` per load, the best, and
the best's ratio to the bound (``--bound-ms``, 5,000); the exit status is 1 when the ratio is
1 or more. Chromium as the tests drive it (Debian's package, ``GEODE_CHROMIUM`` for another).

Run: ``PYTHONPATH=. .venv/bin/python bench/web_first_paint.py [--runs 3] [--bound-ms 5000]
[--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.web_helpers import FCP_JS, Server, big_queue, open_browser


def _fail(message: str, pytrace: bool = False) -> None:
    raise SystemExit(message)


def measure(runs: int) -> dict:
    """Build the queue, load it ``runs`` times in a fresh Chromium; the figures per load."""
    with tempfile.TemporaryDirectory(prefix="geode-web-fcp-") as tmp:
        home = big_queue(Path(tmp))
        with open_browser(_fail) as browser, Server(home) as srv:
            ctx = browser.new_context(viewport={"width": 1360, "height": 900})
            page = ctx.new_page()
            page.goto(srv.url)  # sets the cookie; the measured loads follow
            loads = []
            for _ in range(runs):
                page.goto(f"{srv.base}/queue", wait_until="load")
                fcp = page.evaluate(FCP_JS)
                ttfb = page.evaluate(
                    "(() => { const t = performance.getEntriesByType('navigation')[0];"
                    " return t.responseStart - t.requestStart; })()"
                )
                loads.append({"first_contentful_paint_ms": round(fcp, 1), "server_ms": round(ttfb, 1)})
            shown = page.locator("li.proposal").count()
            ctx.close()
    return {"proposals": 5000, "notes": 10000, "shown": shown, "loads": loads}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bound-ms", type=float, default=5000.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    report = measure(args.runs)
    best = min(load["first_contentful_paint_ms"] for load in report["loads"])
    report.update(best_ms=best, bound_ms=args.bound_ms, ratio=round(best / args.bound_ms, 3))
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    print(f"first paint {best} ms: {report['ratio']} of the {args.bound_ms:.0f} ms bound")
    return 0 if report["ratio"] < 1 and report["shown"] == 50 else 1


if __name__ == "__main__":
    sys.exit(main())
