"""The Health page's charts in a real Chromium, drawn from a ledger this test writes through
geode's own ledger writer, held number for number to ``geode stats --json`` and ``geode study
--json``; at 1280 px and at 420 px, with nothing wider than the window at 420 px.

The values are read from the chart library's live charts (``Chart.getChart(canvas).data``), so a
chart that was never drawn, or drawn from other numbers, fails. The screenshots go to the test's
temporary folder; with ``GEODE_WEB_SHOTS=docs`` they become docs/web-health.png and
docs/web-health-narrow.png.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.prereqs import absent
from tests.test_web_browser import Shots, new_page
from tests.web_helpers import REPO, Server, make_night, open_browser

D = 86400.0

#: days ago -> (deliveries, blocked lookups, marked lookups) written for that day
PLAN = {0: (5, 1, 2), 1: (3, 0, 1), 3: (8, 2, 0), 5: (1, 1, 1)}
CRYSTALS = ["main:notes/exit-code.md", "main:notes/git-add.md", "main:notes/unbound-a.md", "main:notes/unbound-b.md"]

#: each visible element whose right edge passes the window's, unless an ancestor clips it and fits
OVERFLOW_JS = """
(() => {
  const W = window.innerWidth, bad = [];
  const clippedBy = (e) => {
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX;
      if (ox !== "visible") return p;
    }
    return null;
  };
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    if ((r.width === 0 && r.height === 0) || s.display === "none" || s.visibility === "hidden") continue;
    if (r.right <= W + 0.5) continue;
    const c = clippedBy(e);
    if (c && c.getBoundingClientRect().right <= W + 0.5) continue;
    bad.push(`${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}${e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : ""} right=${Math.round(r.right)}`);
  }
  return { scroll: document.documentElement.scrollWidth, inner: W, bad: bad.slice(0, 25) };
})()
"""

CHART_JS = """
(id) => {
  const c = window.Chart && window.Chart.getChart(document.getElementById(id));
  if (!c) return null;
  return { labels: c.data.labels, datasets: c.data.datasets.map((d) => ({ label: d.label, data: d.data })),
           shown: JSON.parse(c.canvas.closest(".chartbox").dataset.chart), width: c.width, height: c.height };
}
"""


@pytest.fixture(scope="module")
def browser():
    with open_browser(fail=lambda why, pytrace=False: absent("browser", why)) as b:
        yield b


def write_ledger(settings) -> int:
    """Real rows through ``geode.delivery.ledger.append``; returns how many deliveries it wrote."""
    from geode.delivery import ledger

    now = time.time()
    events, delivered = [], 0
    for ago, (dl, bl, mk) in PLAN.items():
        base = now - ago * D - 120
        session = f"day{ago}"
        for k in range(dl):
            # the first crystal takes most of them, so the busiest chart has a clear order
            cid = CRYSTALS[0] if k % 3 else CRYSTALS[1 + (k // 3) % 3]
            events.append(
                ledger.new_event(
                    "delivered", ts=base - k, session=f"{session}-{k % 2}", crystal_id=cid, domain="main", channel="act"
                )
            )
            delivered += 1
        events += [ledger.new_event("blocked", ts=base - 50 - k, session=session, domain="main") for k in range(bl)]
        events += [
            ledger.new_event("lookup_marked", ts=base - 60 - k, session=session, domain="main") for k in range(mk)
        ]
        events.append(
            ledger.new_event("withheld", ts=base - 70, session=session, crystal_id=CRYSTALS[1], domain="main")
        )
        events.append(  # a Read of the full note a cut delivery named: counted on its own
            ledger.new_event("followed_up", ts=base - 80, session=session, crystal_id=CRYSTALS[0], domain="main")
        )
    assert ledger.append(settings, events) == "db"
    return delivered


def geode_json(home, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update({"GEODE_HOME": str(home), "PYTHONPATH": str(REPO)})
    out = subprocess.run(
        [sys.executable, "-m", "geode", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=str(home),
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.services
def test_health_charts_match_geode_stats_at_two_widths(browser, tmp_path):
    n = make_night(tmp_path)
    written = write_ledger(n.settings)
    shots = Shots(tmp_path)
    errors: list[str] = []
    with Server(n.home) as srv:
        ctx, page = new_page(browser, errors)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(srv.url)
        page.goto(f"{srv.base}/health")
        page.wait_for_selector("#stats[data-ready='1']")
        page.wait_for_selector("#study[data-ready='1']")
        charts = {c: page.evaluate(CHART_JS, c) for c in ("chart-daily", "chart-busiest", "chart-reach", "chart-arms")}
        stats = geode_json(n.home, "stats")
        study = geode_json(n.home, "study")
        for name, c in charts.items():
            assert c is not None, f"{name}: no chart was drawn"
            assert c["width"] > 200 and c["height"] > 100, (name, c["width"], c["height"])
            assert {"labels": c["labels"], "datasets": c["datasets"]} == c["shown"], name  # data-chart says the same

        # deliveries per day, blocked and marked: the very series `geode stats --json` gives
        daily = charts["chart-daily"]
        assert daily["labels"] == [d["day"] for d in stats["daily"]]
        by_label = {s["label"]: s["data"] for s in daily["datasets"]}
        assert by_label["deliveries"] == [d["deliveries"] for d in stats["daily"]]
        assert by_label["blocked lookups"] == [d["blocked"] for d in stats["daily"]]
        assert by_label["marked lookups"] == [d["marked"] for d in stats["daily"]]
        # and what this test wrote is in it (make_night adds one delivery and one block of its own)
        assert sum(by_label["deliveries"]) == stats["deliveries"] == written + 1
        assert sum(by_label["blocked lookups"]) == stats["blocked_lookups"] == sum(p[1] for p in PLAN.values()) + 1
        assert sum(by_label["marked lookups"]) == stats["marked_lookups"] == sum(p[2] for p in PLAN.values())
        assert sum(1 for v in by_label["deliveries"] if v) >= 3

        busiest = charts["chart-busiest"]
        assert busiest["labels"] == [t["crystal_id"] for t in stats["top10"]]
        assert busiest["datasets"][0]["data"] == [t["deliveries"] for t in stats["top10"]]
        assert busiest["labels"][0] == CRYSTALS[0]
        reach = charts["chart-reach"]
        assert reach["datasets"][0]["data"] == [stats["delivered_registered"], stats["never_fired"]]
        never = page.locator("#never-fired li").all_inner_texts()
        assert never == stats["never_fired_ids"][:40]

        arms = charts["chart-arms"]
        keys = ["units", "units_with_lookup", "blocked", "marked"]
        got = {s["label"]: s["data"] for s in arms["datasets"]}
        assert got["delivered"] == [study["arms"]["delivered"][k] for k in keys]
        assert got["withheld"] == [study["arms"]["withheld"][k] for k in keys]
        assert study["arms"]["withheld"]["units"] == len(PLAN) and study["arms"]["delivered"]["units"] > 0

        # the numbers beside the charts
        nums = page.inner_text("#nums-daily")
        assert f"{stats['deliveries']:,}" in nums and "blocked lookups" in nums
        assert stats["followed_up"] == len(PLAN)
        [follow] = [r for r in nums.splitlines() if r.startswith("follow-ups")]
        assert follow.split()[-1] == str(len(PLAN)), follow
        arms_nums = page.inner_text("#nums-arms")
        assert "withheld" in arms_nums and "lookups per unit" in arms_nums
        # the terminal's text stays one click away
        assert "crystals registered" in page.text_content("#stats-text")
        shots.take(page, "health")

        page.set_viewport_size({"width": 420, "height": 900})
        page.wait_for_timeout(300)  # the charts resize on the window's resize event
        fit = page.evaluate(OVERFLOW_JS)
        assert fit["scroll"] <= fit["inner"], fit
        assert not fit["bad"], fit["bad"]
        c = page.evaluate(CHART_JS, "chart-daily")
        assert c["width"] <= 420, c["width"]
        shots.take(page, "health-narrow")
        ctx.close()
    assert not errors, errors


@pytest.mark.services
def test_health_charts_on_an_empty_ledger_say_so_without_an_error(browser, tmp_path):
    """A store with notes and a ledger that holds nothing yet: the charts are drawn empty, the
    page says the charts fill as the hooks deliver, and no script error occurs."""
    from tests.web_helpers import NOTES, write

    home, store = tmp_path / "home", tmp_path / "store"
    home.mkdir()
    for rel, text in NOTES.items():
        write(store, rel, text)
    (home / "geode.toml").write_text(f"[domains]\nmain = {json.dumps(str(store))}\n", encoding="utf-8")
    errors: list[str] = []
    with Server(home) as srv:
        ctx, page = new_page(browser, errors)
        page.set_viewport_size({"width": 420, "height": 900})
        page.goto(srv.url)
        page.goto(f"{srv.base}/health")
        page.wait_for_selector("#stats[data-ready='1']")
        page.wait_for_selector("#study[data-ready='1']")
        assert "No ledger events yet" in page.inner_text("#stats-window")
        daily = page.evaluate(CHART_JS, "chart-daily")
        assert daily is not None and daily["labels"] == [] and geode_json(home, "stats")["daily"] == []
        reach = page.evaluate(CHART_JS, "chart-reach")
        stats = geode_json(home, "stats")
        assert reach["datasets"][0]["data"] == [0, stats["registered"]] and stats["registered"] > 0
        fit = page.evaluate(OVERFLOW_JS)
        assert fit["scroll"] <= fit["inner"] and not fit["bad"], fit
        ctx.close()
    assert not errors, errors
