"""Every page of ``geode web`` in a real Chromium at a desktop (1280 px) and a narrow (420 px)
window: nothing wider than the window, and a screenshot of each (``GEODE_WEB_SHOTS=docs`` makes
them docs/web-NAME.png and docs/web-NAME-narrow.png). Beside it, what issue 24 left on the
pages: the note's match terms each a chip as written, the graph's labels placed so that none
meets another (read from Cytoscape's own label boxes), and the queue's times said as a person
says them with the ISO time on hover.
"""

from __future__ import annotations

import pytest

from tests.test_web_browser import Shots, new_page, settle
from tests.test_web_health_charts import OVERFLOW_JS, browser  # noqa: F401  (the module's browser fixture)
from tests.web_helpers import Server, make_night, write

WIDTHS = ((1280, ""), (420, "-narrow"))

#: every label's box, read from the live Cytoscape instance; and each pair of boxes that meet
LABELS_JS = """
() => {
  const cy = window.geodeGraph;
  if (!cy) return null;
  const only = { includeNodes: false, includeEdges: false, includeLabels: true, includeMainLabels: true,
    includeSourceLabels: false, includeTargetLabels: false };
  const boxes = cy.elements().filter((e) => e.data("label")).map((e) => {
    const b = e.renderedBoundingBox(only);
    return { id: e.id(), group: e.group(), label: e.data("label"), x1: b.x1, x2: b.x2, y1: b.y1, y2: b.y2, w: b.w, h: b.h };
  });
  const meet = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const p = boxes[i], q = boxes[j];
    if (p.x1 < q.x2 && q.x1 < p.x2 && p.y1 < q.y2 && q.y1 < p.y2) meet.push([p.label, q.label]);
  }
  return { boxes, meet, nodes: cy.nodes().length, edges: cy.edges().length };
}
"""


def _fits(page, name: str, width: int) -> None:
    fit = page.evaluate(OVERFLOW_JS)
    assert fit["inner"] == width, (name, fit)
    assert fit["scroll"] <= fit["inner"] and not fit["bad"], (name, width, fit)


@pytest.mark.services
def test_every_page_fits_a_desktop_and_a_narrow_window(browser, tmp_path):  # noqa: F811
    n = make_night(tmp_path)
    deploy = n.store / "runbooks/deploy.md"
    deploy.write_bytes(deploy.read_bytes() + b"3. Celebrate.\n")  # the fix-deploy proposal now conflicts
    shots = Shots(tmp_path)
    errors: list[str] = []
    seen: list[str] = []
    with Server(n.home) as srv:
        ctx, page = new_page(browser, errors)
        page.goto(srv.url)
        for width, suffix in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})

            def shoot(name: str, width: int = width, suffix: str = suffix) -> None:
                page.wait_for_load_state("networkidle")  # an action's reload has finished
                page.wait_for_selector("body[data-ready='1']")
                _fits(page, name, width)
                shots.take(page, name + suffix)
                seen.append(name + suffix)

            page.goto(f"{srv.base}/queue")
            settle(page, "li.proposal")
            shoot("queue")
            page.goto(f"{srv.base}/proposals/{n.ids['archive-old-retry']}")
            settle(page, "article.proposal-page")
            shoot("proposal")
            page.goto(f"{srv.base}/queue?agent=cleaner")
            settle(page, "li.proposal")
            page.click("button.bulk-go[data-action='reject']")
            page.wait_for_selector("#bulk-preview .count")
            shoot("bulk-preview")
            page.goto(f"{srv.base}/proposals/{n.ids['fix-deploy']}")
            settle(page, "article.proposal-page")
            page.click(".decide button.act[data-action='approve']")
            page.wait_for_selector("article[data-status='conflict']")
            shoot("conflict")
            page.goto(f"{srv.base}/history")
            settle(page, "table.history")
            shoot("history")
            page.goto(f"{srv.base}/store?q=pipeline+exit+status&mode=text")
            settle(page, "li.hit")
            shoot("store")
            page.goto(f"{srv.base}/note?a=main:notes/exit-code")
            settle(page, ".essence")
            page.wait_for_selector("#graph[data-ready='1']", timeout=20000)
            shoot("note")
            _fits(page, "graph", width)
            page.locator("section.graph-wrap").screenshot(path=str(shots.dir / f"graph{suffix}.png"))
            shots.copy(f"graph{suffix}")
            seen.append("graph" + suffix)
            page.goto(f"{srv.base}/health")
            page.wait_for_selector("#stats[data-ready='1']")
            page.wait_for_selector("#study[data-ready='1']")
            page.wait_for_timeout(300)  # the charts resize on the window's size
            shoot("health")
        ctx.close()

        # the token page: a browser that arrives without the token
        for width, suffix in WIDTHS:
            tctx, tpage = new_page(browser, errors)
            tpage.set_viewport_size({"width": width, "height": 900})
            tpage.goto(f"{srv.base}/queue")
            tpage.wait_for_selector("main#token-page")
            _fits(tpage, "token-page", width)
            shots.take(tpage, "token-page" + suffix)
            seen.append("token-page" + suffix)
            tctx.close()
    pages = ("queue", "proposal", "bulk-preview", "conflict", "history", "store", "note", "graph", "health")
    assert sorted(seen) == sorted([p + s for p in (*pages, "token-page") for _w, s in WIDTHS])
    # the browser logs the token page's own 401 as a failed load (expected); nothing else
    assert [e for e in errors if "status of 401" not in e and "status of 409" not in e] == [], errors


@pytest.mark.services
def test_the_note_page_shows_each_match_term_as_its_own_chip_as_written(browser, tmp_path):  # noqa: F811
    n = make_night(tmp_path)  # exit-code matches "| tail, |tail"; git-add-all "git add -A"
    errors: list[str] = []
    with Server(n.home) as srv:
        ctx, page = new_page(browser, errors)
        page.goto(srv.url)
        page.goto(f"{srv.base}/note?a=main:notes/exit-code")
        settle(page, ".essence")
        chips = page.locator("ul.terms code.term")
        assert chips.all_inner_texts() == ["| tail", "|tail"]
        a, b = (chips.nth(i).bounding_box() for i in range(2))
        assert a and b and a["x"] + a["width"] < b["x"] or a["y"] + a["height"] <= b["y"], (a, b)  # apart
        page.goto(f"{srv.base}/note?a=main:notes/git-add-all")
        settle(page, ".essence")
        assert page.locator("ul.terms code.term").all_inner_texts() == ["git add -A"]  # never folded
        ctx.close()
    assert not errors, errors


def _crowded_store(tmp_path):
    """A hub with eight neighbours, each linked both ways with long relation names: labels that
    a plain layout lays over each other."""
    import json

    home, store = tmp_path / "home", tmp_path / "store"
    home.mkdir()
    names = [f"neighbour-note-{i}" for i in range(8)]
    hub = "---\nname: hub\n---\n# Hub\n\n" + "".join(f"- relates_to [[{m}]]\n" for m in names)
    write(store, "hub.md", hub)
    for i, m in enumerate(names):
        other = names[(i + 1) % len(names)]
        write(store, f"{m}.md", f"---\nname: {m}\n---\n# {m}\n\n- part_of [[hub]]\n- depends_on [[{other}]]\n")
    (home / "geode.toml").write_text(f"[domains]\nmain = {json.dumps(str(store))}\n", encoding="utf-8")
    return home


@pytest.mark.services
@pytest.mark.parametrize("width", [1280, 420])
def test_the_graph_places_its_labels_so_that_none_meets_another(browser, tmp_path, width):  # noqa: F811
    home = _crowded_store(tmp_path)
    errors: list[str] = []
    with Server(home) as srv:
        ctx, page = new_page(browser, errors)
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(srv.url)
        page.goto(f"{srv.base}/note?a=main:hub")
        page.wait_for_selector("#graph[data-ready='1']", timeout=20000)
        got = page.evaluate(LABELS_JS)
        assert got is not None, "no Cytoscape graph was drawn"
        assert got["nodes"] == 9 and got["edges"] >= 8, (got["nodes"], got["edges"])
        edge_labels = [b for b in got["boxes"] if b["group"] == "edges"]
        node_labels = [b for b in got["boxes"] if b["group"] == "nodes"]
        assert len(node_labels) == 9 and len(edge_labels) == got["edges"], got["boxes"]
        assert all(b["w"] > 5 and b["h"] > 3 for b in got["boxes"]), got["boxes"]  # drawn, readable
        assert got["meet"] == [], got["meet"]
        ctx.close()
    assert not errors, errors


@pytest.mark.services
def test_the_queue_says_its_times_as_a_person_does_with_the_iso_time_on_hover(browser, tmp_path):  # noqa: F811
    n = make_night(tmp_path)
    errors: list[str] = []
    with Server(n.home) as srv:
        ctx, page = new_page(browser, errors)
        page.goto(srv.url)
        settle(page, "li.proposal")
        times = page.locator("li.proposal .filed time")
        assert times.count() == len(n.ids)
        for i in range(times.count()):
            t = times.nth(i)
            text, iso = t.inner_text(), t.get_attribute("title")
            assert text == "just now" or text.endswith(" ago"), text
            assert iso == t.get_attribute("datetime") and iso.endswith("Z") and "T" in iso, iso
        # the inline evidence of a proposal: its ledger rows' times too
        pid = n.ids["bind-git-add"]
        page.click(f"li#p{pid} button.expand")
        ev = page.locator(f"li#p{pid} .inline ul.evidence li")
        ev.first.wait_for()
        when = ev.first.locator("time")
        assert when.count() == 1 and when.get_attribute("title").endswith("Z"), ev.first.inner_text()
        assert "T" not in when.inner_text() and when.inner_text().endswith(("ago", "just now")), when.inner_text()
        ctx.close()
    assert not errors, errors
