"""build_context scores, read_note resolution, recent_activity windows (SQLite index, no model)."""

from __future__ import annotations

import os
import time

import pytest

from geode.kernel.config import load_settings
from geode.recall.context import NotFound, build_context, read_note, recent_activity
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from tests.stores import write


@pytest.fixture
def two_domains(tmp_path):
    """Domains ``eng`` and ``ops``; a small graph with typed relations, prose links, two paths
    to one note, an incoming link, a cross-domain edge and an unresolved target."""
    home = tmp_path / "home"
    home.mkdir()
    eng, ops = tmp_path / "eng", tmp_path / "ops"
    (home / "geode.toml").write_text(f'[domains]\neng = "{eng}"\nops = "{ops}"\n', encoding="utf-8")
    write(
        eng,
        "a.md",
        "---\nname: a\n---\n# Anchor A\n\n- relates_to [[b]]\n- depends_on [[missing-note]]\n"
        "See [[c]] for the background.\n",
    )
    write(eng, "b.md", "---\nname: b\n---\n# Bee\n\n- relates_to [[d]]\n- part_of [[geode://ops/f]]\n")
    write(eng, "c.md", "---\nname: c\n---\n# Sea\n\n- relates_to [[d]]\n")
    write(eng, "d.md", "---\nname: d\n---\n# Dee\n\nA leaf.\n")
    write(eng, "e.md", "---\nname: e\n---\n# Eee\n\nMentions [the anchor](a.md) in prose.\n")
    write(eng, "runbooks/r1.md", "---\nname: r1\n---\n# Runbook one\n\n- uses [[d]]\n")
    write(eng, "runbooks/r2.md", "---\nname: r2\n---\n# Runbook two\n\nSee [[r1]].\n")
    write(ops, "f.md", "---\nname: f\n---\n# Ops F\n\nNo links.\n")
    s = load_settings(home=str(home))
    RecallIndex(s).refresh()
    yield s
    dispose_engines()


def by_addr(res) -> dict:
    return {r["address"]: r for r in res["related"]}


def test_build_context_scores_typed_over_prose_near_over_far_and_sums_paths(two_domains):
    res = build_context(two_domains, "geode://eng/a", depth=2)
    r = by_addr(res)
    assert r["geode://eng/b"]["score"] == 1.0 and r["geode://eng/b"]["relation"] == "relates_to"
    assert r["geode://eng/c"]["score"] == 0.5 and r["geode://eng/c"]["relation"] == "links_to"
    e = r["geode://eng/e"]
    assert (e["score"], e["direction"], e["relation"], e["hops"]) == (0.5, "in", "links_to", 1)
    d = r["geode://eng/d"]  # via b (1 x 1 x 0.5) and via c (0.5 x 1 x 0.5)
    assert d["score"] == 0.75 and d["paths"] == 2 and d["hops"] == 2 and d["via"] == "geode://eng/b"
    f = r["geode://ops/f"]  # across domains
    assert f["score"] == 0.5 and f["domain"] == "ops" and f["relation"] == "part_of"
    order = [x["address"] for x in res["related"]]
    assert order[0] == "geode://eng/b" and order.index("geode://eng/d") < order.index("geode://eng/c")
    assert all("content" not in x for x in res["related"])
    assert "geode://eng/runbooks/r1" not in r  # a - b - d - r1 is three hops
    r1 = by_addr(build_context(two_domains, "geode://eng/a", depth=3))["geode://eng/runbooks/r1"]
    # via b: 1 x 1 x 1 x 0.5^2 = 0.25; via c: 0.5 x 1 x 1 x 0.5^2 = 0.125
    assert (r1["hops"], r1["paths"], r1["score"], r1["direction"]) == (3, 2, 0.375, "in")


def test_build_context_depth_limit_max_related_and_folder_glob(two_domains):
    one = by_addr(build_context(two_domains, "geode://eng/a", depth=1))
    assert set(one) == {"geode://eng/b", "geode://eng/c", "geode://eng/e"}
    top2 = build_context(two_domains, "geode://eng/a", depth=3, max_related=2)
    assert len(top2["related"]) == 2 and top2["total"] > 2
    glob = build_context(two_domains, "geode://eng/runbooks/*", depth=1)
    assert sorted(glob["anchors"]) == ["geode://eng/runbooks/r1", "geode://eng/runbooks/r2"]
    assert [x["address"] for x in glob["related"]] == ["geode://eng/d"]  # r1<->r2 are both anchors
    with pytest.raises(NotFound):
        build_context(two_domains, "geode://eng/nothing-here")
    with pytest.raises(ValueError):
        build_context(two_domains, "geode://eng/a", depth=4)


def test_read_note_marks_links_resolved_or_not_summarises_backlinks_and_names_the_next_anchor(two_domains):
    r = read_note(two_domains, "geode://eng/a")
    links = {(x["relation"], x["target"]): x for x in r["links"]}
    assert links[("relates_to", "b")]["resolved"] and links[("relates_to", "b")]["address"] == "geode://eng/b"
    assert links[("links_to", "c")]["resolved"] and links[("links_to", "c")]["line"] == 8
    assert not links[("depends_on", "missing-note")]["resolved"] and r["unresolved"] == 1
    assert r["backlinks"]["count"] == 1 and r["backlinks"]["by_relation"] == {"links_to": 1}
    assert r["backlinks"]["from"][0]["address"] == "geode://eng/e"
    assert r["next"] == {"build_context": "geode://eng/a", "command": "geode context geode://eng/a"}
    assert r["content"].startswith("---\nname: a")
    f = read_note(two_domains, "ops:f")
    assert f["backlinks"]["from"][0] == {"address": "geode://eng/b", "title": "Bee", "relation": "part_of", "line": 7}
    lone = tmp_note(two_domains)
    assert read_note(two_domains, lone)["next"] is None


def tmp_note(settings) -> str:
    write(settings.domains["ops"], "lone.md", "---\nname: lone\n---\nNothing links here.\n")
    return "geode://ops/lone"


def test_recent_activity_day_week_fortnight_across_domains(two_domains):
    s = two_domains
    now = time.time()
    eng, ops = s.domains["eng"], s.domains["ops"]
    ages = {
        (eng, "a.md"): 0.2,
        (eng, "b.md"): 3,
        (ops, "f.md"): 10,
        (eng, "c.md"): 40,
        (eng, "d.md"): 40,
        (eng, "e.md"): 40,
        (eng, "runbooks/r1.md"): 40,
        (eng, "runbooks/r2.md"): 40,
    }
    for (root, rel), days in ages.items():
        t = now - days * 86400
        os.utime(os.path.join(root, rel), (t, t))
    RecallIndex(s).refresh()

    def got(period):
        return [(x["domain"], x["path"]) for x in recent_activity(s, period, now=now)["results"]]

    assert got("day") == [("eng", "a.md")]
    assert got("week") == [("eng", "a.md"), ("eng", "b.md")]
    fort = recent_activity(s, "fortnight", now=now)
    assert [(x["domain"], x["path"]) for x in fort["results"]] == [("eng", "a.md"), ("eng", "b.md"), ("ops", "f.md")]
    assert fort["by_domain"] == {"eng": 2, "ops": 1} and fort["results"][2]["date"][:10]
    assert got("5d") == [("eng", "a.md"), ("eng", "b.md")]
    assert [x["path"] for x in recent_activity(s, "fortnight", domain="ops", now=now)["results"]] == ["f.md"]
    with pytest.raises(ValueError):
        recent_activity(s, "yesteryear")
