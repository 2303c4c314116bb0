"""The control arm: assignment, the unit rule, the rate, the off switch and the stop rule."""

from __future__ import annotations

import datetime
import functools
import os
import sqlite3
import subprocess
import sys

from geode.delivery import control, ledger
from geode.kernel.config import load_settings
from geode.records import models
from tests.stores import plain_settings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SALT = "fixed-test-salt"
#: every control test pins the salt (a test may pin another)
make_settings = functools.partial(plain_settings, control_salt=SALT)


def ledger_conn(settings) -> sqlite3.Connection:
    models.init_db(settings).dispose()
    return ledger.connect(settings, timeout_ms=5000)


def units_with(salt: str, rate: float, withheld: bool, n: int, prefix: str = "s") -> list[tuple[str, str]]:
    """Units (session, crystal) whose fixed position puts them in the wanted arm."""
    found = []
    i = 0
    while len(found) < n:
        unit = (f"{prefix}{i}", f"main:c{i}")
        if (control.assignment(salt, *unit) < rate) == withheld:
            found.append(unit)
        i += 1
    return found


def log_withheld(settings, session: str, crystal_id: str) -> None:
    assert ledger.append(settings, [ledger.new_event("withheld", session=session, crystal_id=crystal_id)]) == "db"


def test_rate_is_about_ten_percent_over_2000_units(tmp_path):
    """Tolerance: 10% +/- 2.5 points (about +/- 3.7 standard deviations of a binomial with
    n = 2,000, p = 0.1), for three salts. Without a database: the assignment alone."""
    for salt in (SALT, "another salt", ""):
        s = make_settings(tmp_path, control_salt=salt)
        withheld = sum(
            control.should_withhold(s, None, f"session-{i // 20}", f"main:crystal-{i % 20}-{i // 400}")[0]
            for i in range(2000)
        )
        assert 150 <= withheld <= 250, (salt, withheld)


def test_assignment_is_the_same_in_another_process(tmp_path):
    s = make_settings(tmp_path)
    pairs = [(f"s{i}", f"main:c{i}") for i in range(200)]
    here = [control.should_withhold(s, None, a, b)[0] for a, b in pairs]
    assert any(here) and not all(here)
    code = (
        "import sys; from geode.delivery import control; from tests.stores import plain_settings;"
        f"s = plain_settings({str(tmp_path)!r}, control_salt={SALT!r});"
        f"print(''.join('1' if control.should_withhold(s, None, f's{{i}}', f'main:c{{i}}')[0] else '0' for i in range(200)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "".join("1" if w else "0" for w in here)


def test_rate_zero_withholds_nothing(tmp_path):
    env = {"GEODE_HOME": str(tmp_path), "GEODE_WITHHOLD_RATE": "0"}
    s = load_settings(home=str(tmp_path), env=env)
    assert s.withhold_rate == 0.0 and s.withhold_rate_source == "GEODE_WITHHOLD_RATE"
    conn = ledger_conn(make_settings(tmp_path, withhold_rate=0.5))  # the recorded plan says 50%
    try:
        assert control.load_plan(s, conn)["rate"] == 0.0
        decisions = [control.should_withhold(s, conn, f"s{i}", f"main:c{i}") for i in range(2000)]
        assert not any(w for w, _ in decisions)
        assert "off" in decisions[0][1]
    finally:
        conn.close()


def test_environment_rate_overrides_the_recorded_plan(tmp_path):
    conn = ledger_conn(make_settings(tmp_path, withhold_rate=0.1))
    try:
        s = load_settings(home=str(tmp_path), env={"GEODE_WITHHOLD_RATE": "1"})
        assert control.load_plan(s, conn)["rate"] == 1.0
        assert control.should_withhold(s, conn, "s", "main:any")[0]
    finally:
        conn.close()


def test_the_recorded_plan_wins_over_a_later_config(tmp_path):
    recorded = make_settings(tmp_path, withhold_rate=0.1)
    conn = ledger_conn(recorded)
    try:
        later = make_settings(tmp_path, withhold_rate=0.9, control_salt="changed")
        plan = control.load_plan(later, conn)
        assert plan["rate"] == 0.1 and plan["source"] == "recorded" and plan["salt"] == SALT
        (unit,) = units_with(SALT, 0.1, withheld=False, n=1)
        assert control.should_withhold(later, conn, *unit) == control.should_withhold(recorded, conn, *unit)
        assert not control.should_withhold(later, conn, *unit)[0]
    finally:
        conn.close()


def test_a_withheld_unit_stays_withheld_for_the_session(tmp_path):
    s = make_settings(tmp_path, withhold_rate=0.1)
    conn = ledger_conn(s)
    try:
        # A unit withheld at 10% whose position lies above 5%: lowering the rate to 5% would
        # deliver it, unless the unit rule holds.
        unit = next(u for u in units_with(SALT, 0.1, withheld=True, n=50) if control.assignment(SALT, *u) >= 0.05)
        withhold, why = control.should_withhold(s, conn, *unit)
        assert withhold and why.startswith("withheld arm")
        log_withheld(s, *unit)
        lowered = make_settings(tmp_path, withhold_rate=0.05)
        plan = dict(control.load_plan(s, conn), rate=0.05)
        for _ in range(3):  # every later action in the session
            assert control.should_withhold(lowered, conn, *unit, plan=plan) == (
                True,
                "already withheld in this session",
            )
        # the same crystal in another session is a new unit, decided afresh
        other_session = (unit[0] + "-next", unit[1])
        expected = control.assignment(SALT, *other_session) < 0.05
        assert control.should_withhold(lowered, conn, *other_session, plan=plan)[0] == expected
    finally:
        conn.close()


def test_stop_rule_by_units(tmp_path):
    s = make_settings(tmp_path, withhold_rate=0.1, stop_units=3)
    conn = ledger_conn(s)
    try:
        first, second, third, fourth = units_with(SALT, 0.1, withheld=True, n=4)
        for unit in (first, second):
            assert control.should_withhold(s, conn, *unit)[0]
            log_withheld(s, *unit)
            log_withheld(s, *unit)  # a unit firing twice is still one unit
        assert control.should_withhold(s, conn, *third)[0]  # 2 units < 3
        log_withheld(s, *third)
        withhold, why = control.should_withhold(s, conn, *fourth)
        assert not withhold and "3 withheld units" in why
        assert control.should_withhold(s, conn, *first) == (True, "already withheld in this session")
    finally:
        conn.close()


def test_stop_rule_by_date(tmp_path):
    s = make_settings(tmp_path, withhold_rate=0.1, stop_date="2026-12-17")
    conn = ledger_conn(s)
    try:
        early, late = units_with(SALT, 0.1, withheld=True, n=2)
        assert control.should_withhold(s, conn, *early, today=datetime.date(2026, 12, 17))[0]  # on the day: still on
        log_withheld(s, *early)
        withhold, why = control.should_withhold(s, conn, *late, today=datetime.date(2026, 12, 18))
        assert not withhold and "after the stop date" in why
        assert not control.should_withhold(s, None, *late, today="2027-01-01")[0]
        assert control.should_withhold(s, conn, *early, today=datetime.date(2027, 1, 1))[0]  # stays withheld
    finally:
        conn.close()


def test_a_malformed_stop_date_stops_withholding(tmp_path):
    s = make_settings(tmp_path, withhold_rate=1.0, stop_date="17/12/2026")
    withhold, why = control.should_withhold(s, None, "s", "main:c")
    assert not withhold and "not YYYY-MM-DD" in why


def test_without_a_session_there_is_no_unit_and_nothing_is_withheld(tmp_path):
    s = make_settings(tmp_path, withhold_rate=1.0)
    assert control.should_withhold(s, None, "", "main:c") == (
        False,
        "no unit: a session and a crystal id are both needed",
    )
    assert control.should_withhold(s, None, "s", "main:c")[0]


def test_a_database_without_tables_falls_back_to_the_settings(tmp_path):
    s = make_settings(tmp_path, withhold_rate=1.0)
    sqlite3.connect(s.records_file).close()
    conn = sqlite3.connect(s.records_file)
    try:
        assert control.load_plan(s, conn)["source"] == "settings"
        assert control.should_withhold(s, conn, "s", "main:c")[0]
    finally:
        conn.close()
