"""`geode stats` and `geode study` on a hand-built ledger whose answers are worked out here,
by hand, in comments, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json

import pytest

from geode.delivery import ledger
from geode.evidence.stats import compute_stats, render_stats
from geode.evidence.study import compute_study, render_study
from geode.records import models
from tests.stores import plain_settings

D = 86400.0
T0 = 1_780_000_000.0
NOW = T0 + 10 * D
X = [f"main:x{i:02d}" for i in range(1, 12)]  # eleven crystals delivered twice each
REGISTERED = ["main:a", "main:b", "main:c", "main:d", "main:e"] + X


def ev(kind: str, ts: float, session: str, crystal: str = "", **kw) -> dict:
    return ledger.new_event(kind, ts=ts, session=session, crystal_id=crystal, **kw)


def hand_built_ledger() -> list[dict]:
    """Window: T0 .. T0+10d (days=10, now=T0+10d), halves split at T0+5d."""
    e = []
    # outside the window, before it: session s0
    e += [ev("delivered", T0 - D, "s0", "main:a"), ev("blocked", T0 - D + 10, "s0")]
    # first half
    s1 = T0 + 1 * D
    e += [
        ev("delivered", s1 + 0, "s1", "main:a"),
        ev("delivered", s1 + 10, "s1", "main:a"),
        ev("delivered", s1 + 20, "s1", "main:b"),
        ev("blocked", s1 + 25, "s1"),
        ev("delivered", s1 + 30, "s1", "main:a"),
    ]
    s2 = T0 + 2 * D
    e += [
        ev("delivered", s2 + 0, "s2", "main:a"),
        ev("delivered", s2 + 10, "s2", "main:c", truncated=1),
        ev("delivered", s2 + 20, "s2", "main:a"),
        ev("delivered", s2 + 30, "s2", "main:b"),
        ev("blocked", s2 + 40, "s2"),
        ev("lookup_marked", s2 + 50, "s2"),
    ]
    s5 = T0 + 3 * D
    e += [ev("delivered", s5 + k, "s5", X[k % 11]) for k in range(22)]
    # second half
    s3 = T0 + 6 * D
    e += [
        ev("withheld", s3 + 0, "s3", "main:d"),
        ev("withheld", s3 + 5, "s3", "main:d"),
        ev("delivered", s3 + 10, "s3", "main:a"),
        ev("delivered", s3 + 20, "s3", "main:gone"),
        ev("blocked", s3 + 30, "s3"),
    ]
    s4 = T0 + 7 * D
    e += [
        ev("delivered", s4 + 0, "s4", "main:b"),
        ev("lookup_marked", s4 + 2, "s4"),
        ev("withheld", s4 + 5, "s4", "main:a"),
        ev("delivered", s4 + 8, "s4", "main:a"),
    ]
    # after `now`: outside every window that ends now
    e += [ev("delivered", NOW + 100, "s9", "main:b")]
    return e


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def loaded(request, tmp_path):
    """(settings, engine) with the hand-built ledger, the plan recorded as rate 0.1, 2 units."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    s = plain_settings(
        tmp_path, database_url=url, withhold_rate=0.1, stop_units=2, stop_date="2026-12-17", control_salt="salt"
    )
    engine = models.init_db(s)
    models.insert_events(engine, hand_built_ledger())
    yield s, engine
    engine.dispose()


def test_stats_on_the_hand_built_ledger(loaded):
    s, engine = loaded
    d = compute_stats(s, engine, REGISTERED, oversize=["main:c"], days=10, now=NOW)
    # in the window: s1 5 events, s2 6, s5 22, s3 5, s4 4 = 42
    assert d["examined_events"] == 42
    assert d["registered"] == 16
    # delivered in the window, per crystal: a: s1 3, s2 2, s3 1, s4 1 = 7;
    # b: s1 1, s2 1, s4 1 = 3; c 1; gone 1; x01..x11 2 each = 22. Total 7+3+1+1+22 = 34.
    assert d["deliveries"] == 34
    assert d["deliveries_per_day"] == 3.4
    assert d["delivered_at_least_once"] == 15  # a, b, c, gone, 11 x
    assert d["delivered_registered"] == 14  # gone is not registered
    assert d["never_fired"] == 2 and d["never_fired_ids"] == ["main:d", "main:e"]  # d only withheld
    # busiest ten: a 7, b 3, then eight x at 2 = 26 of 34
    assert d["top10"][:2] == [{"crystal_id": "main:a", "deliveries": 7}, {"crystal_id": "main:b", "deliveries": 3}]
    assert len(d["top10"]) == 10 and d["top10_share"] == round(26 / 34, 4)
    # fires per crystal sorted: 1, 1, 2 x 11, 3, 7 -> the 8th of 15 is 2
    assert d["median_fires"] == 2.0
    assert d["oversize"] == 1 and d["truncated_deliveries"] == 1
    assert d["blocked_lookups"] == 3 and d["marked_lookups"] == 2  # s0's block is outside
    first, second = d["halves"]
    # first half: deliveries s1 4 + s2 4 + s5 22 = 30; blocked 2, marked 1
    assert (first["deliveries"], first["blocked"], first["marked"]) == (30, 2, 1)
    assert first["lookups_per_1000"] == 100.0 and first["blocked_per_1000"] == 66.67
    assert first["blocked_share"] == 0.6667
    # second half: deliveries s3 2 + s4 2 = 4; blocked 1, marked 1
    assert (second["deliveries"], second["blocked"], second["marked"]) == (4, 1, 1)
    assert second["lookups_per_1000"] == 500.0 and second["blocked_per_1000"] == 250.0
    assert second["blocked_share"] == 0.5
    assert d["withheld_units"] == 2 and d["withheld_events"] == 3  # (s3,d) twice, (s4,a)
    # per UTC day: T0 is 20:26 UTC, so each session's seconds stay on its day; the window's
    # eleven days (T0's day .. NOW's day) are all there, empty ones as zeros
    daily = d["daily"]
    assert len(daily) == 11 and daily[0]["day"] == "2026-05-28" and daily[-1]["day"] == "2026-06-07"
    triples = [(x["deliveries"], x["blocked"], x["marked"]) for x in daily]
    assert triples == [
        (0, 0, 0),
        (4, 1, 0),
        (4, 1, 1),
        (22, 0, 0),
        (0, 0, 0),
        (0, 0, 0),
        (2, 1, 0),
        (2, 0, 1),
        (0, 0, 0),
        (0, 0, 0),
        (0, 0, 0),
    ]
    assert sum(t[0] for t in triples) == d["deliveries"] and sum(t[1] for t in triples) == d["blocked_lookups"]
    json.dumps(d)  # the shape is JSON
    text = render_stats(d)
    assert "never fired: main:d, main:e" in text
    assert "76.5%" in text  # 26/34


def test_stats_without_a_window_start_at_the_first_event(loaded):
    s, engine = loaded
    d = compute_stats(s, engine, 16, 0, days=None, now=NOW)
    assert d["window"]["start"] == T0 - D and d["window"]["days"] == 11.0
    assert d["examined_events"] == 44  # the 42 plus s0's two; s9 lies after now
    assert d["deliveries"] == 35 and d["blocked_lookups"] == 4
    assert d["never_fired_ids"] is None and d["never_fired"] == 1  # 16 registered - 15 delivered ids


def test_study_on_the_hand_built_ledger(loaded):
    s, engine = loaded
    later = plain_settings(
        s.home,
        database_url=s.database_url,
        withhold_rate=0.1,
        stop_units=5,
        stop_date="2026-12-17",
        control_salt="salt",
    )
    d = compute_study(later, engine, today="2026-10-01")
    delivered, withheld = d["arms"]["delivered"], d["arms"]["withheld"]
    # delivered units: s0a, s1a, s1b, s2a, s2c, s2b, 11 x in s5, s3a, s3gone, s4b, s9b = 21
    # lookups after each: s0a 1b; s1a 1b; s1b 1b (blocked at +25 follows b at +20); s2a, s2c, s2b
    # each 1b+1m; x 0; s3a 1b; s3gone 1b; s4b 1m; s9b 0 -> blocked 8, marked 4
    assert delivered == {
        "units": 21,
        "lookups": 12,
        "blocked": 8,
        "marked": 4,
        "units_with_lookup": 9,
        "lookups_per_unit": round(12 / 21, 4),
    }
    # withheld units: s3d (blocked at +30 follows) and s4a (the marked lookup at +2 came before
    # it at +5); s4a was also delivered later at +8: mixed, counted by its first event
    assert withheld == {
        "units": 2,
        "lookups": 1,
        "blocked": 1,
        "marked": 0,
        "units_with_lookup": 1,
        "lookups_per_unit": 0.5,
    }
    assert d["mixed_units"] == 1 and d["sessions"] == 7
    plan = d["plan"]
    assert plan["recorded"]["rate"] == 0.1 and plan["recorded"]["stop_units"] == 2
    assert plan["differs"] == ["stop_units"] and plan["in_force"]["stop_units"] == 2
    assert plan["withheld_units_total"] == 2 and plan["stopped"] is True
    assert "2 withheld units" in plan["stop_reason"]
    text = render_study(d)
    assert "differs from the recorded plan in: stop_units" in text and "STOPPED" in text


def test_study_stop_by_date(loaded):
    s, engine = loaded
    wide = plain_settings(s.home, database_url=s.database_url, withhold_rate=0.1, stop_units=2, stop_date="2026-12-17")
    assert compute_study(wide, engine, today="2026-12-18")["plan"]["stop_reason"].startswith("stopped: today")


def test_stats_on_an_empty_ledger_say_so(tmp_path):
    s = plain_settings(tmp_path)
    engine = models.init_db(s)
    try:
        d = compute_stats(s, engine, ["main:a"], 0, now=NOW)
        assert d["examined_events"] == 0 and d["deliveries"] == 0 and d["halves"] == []
        assert d["never_fired_ids"] == ["main:a"] and d["median_fires"] is None
        assert "these figures say nothing yet" in render_stats(d)
        study = compute_study(s, engine)
        assert study["plan"]["stopped"] is False and study["plan"]["stop_reason"] == "running"
        assert study["arms"]["delivered"]["units"] == 0 and study["arms"]["delivered"]["lookups_per_unit"] is None
        assert "One arm is empty" in render_study(study)
    finally:
        engine.dispose()
