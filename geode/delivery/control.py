"""The control arm: withhold a random share of crystals so that their effect can be measured.

Why: counting deliveries says how often a crystal showed up, never whether it helped. A
control group does: a configured share (10% by default) of crystals is withheld at random,
and every withholding is logged (a ``withheld`` event), so lookups after delivered and after
withheld crystals can be compared (``geode study``).

The rules, fixed before any data exists (``models.ControlPlan``, written when the ledger is
created, read back here; the config only counts while no plan is recorded):

- The unit is one crystal in one session. A crystal firing forty times in a session is one
  decision, not forty results: once withheld, it stays withheld for the rest of the session.
- The assignment is ``sha256(salt NUL session NUL crystal_id)`` mapped to [0, 1) and compared
  with the rate. It is deterministic, so every hook process agrees without shared state, and
  the recorded random salt keeps it from being steered.
- The stop rule: once the ledger holds ``stop_units`` distinct withheld units, or once today is
  after ``stop_date``, no new unit is withheld (a unit already withheld stays withheld).
- ``GEODE_WITHHOLD_RATE`` overrides the rate (``0`` turns withholding off entirely, including
  units withheld earlier in the session: an off switch that leaves exceptions is not one).

Standard library only: this runs in the hook. The cost per call is one indexed query (is this
unit already withheld?) plus, for the ~10% of units assigned to the withheld arm, one count of
withheld units. Pass ``plan=`` from ``load_plan`` to avoid re-reading the plan per crystal.
Two hooks racing at the last unit can overshoot ``stop_units`` by one or two: documented, not
prevented (preventing it would need a write lock in the hook's read path).
"""

from __future__ import annotations

import time

from geode.kernel.sqlite import sqlite3

#: The session of a delivery asked for by hand (``geode deliver`` without ``--session``): such a
#: call is never withheld, and ``geode stats`` and ``geode study`` leave its rows out, so a person
#: trying a crystal neither feeds the control arm nor counts as an agent's delivery.
MANUAL_SESSION_PREFIX = "manual:"

#: Why a crystal was not withheld: its binding says ``control: never`` (a safety note that must
#: reach the agent every time). The reason the engine gives, and the ``detail`` of its delivered
#: rows, so that ``geode study`` counts such units beside the two arms instead of in either:
#: they were never assigned, so counting them as "delivered" would bias the comparison.
EXEMPT_REASON = "exempt (control: never): never withheld"
EXEMPT_DETAIL = "control: never"

_PLAN_SQL = "SELECT rate, stop_units, stop_date, salt FROM control_plan ORDER BY id LIMIT 1"
_ALREADY_SQL = "SELECT 1 FROM ledger_event WHERE session = ? AND crystal_id = ? AND kind = 'withheld' LIMIT 1"
_UNITS_SQL = "SELECT COUNT(*) FROM (SELECT DISTINCT session, crystal_id FROM ledger_event WHERE kind = 'withheld')"


def load_plan(settings, conn: sqlite3.Connection | None = None) -> dict:
    """The plan in force: the recorded ``control_plan`` row when there is one, else the
    settings; ``GEODE_WITHHOLD_RATE`` overrides the rate either way.

    Keys: rate, stop_units, stop_date, salt, source (``recorded`` or ``settings``),
    rate_source (``plan``, ``config``, ``default`` or ``GEODE_WITHHOLD_RATE``).
    """
    plan = {
        "rate": float(settings.withhold_rate),
        "stop_units": int(settings.stop_units),
        "stop_date": settings.stop_date,
        "salt": settings.control_salt or "",
        "source": "settings",
        "rate_source": settings.withhold_rate_source,
    }
    if conn is not None:
        try:
            row = conn.execute(_PLAN_SQL).fetchone()
        except sqlite3.Error:
            row = None  # no plan table yet (or unreadable): the settings stand in
        if row is not None:
            plan.update(
                rate=float(row[0]),
                stop_units=int(row[1]),
                stop_date=row[2],
                salt=row[3] or "",
                source="recorded",
                rate_source="plan",
            )
    if settings.withhold_rate_source == "GEODE_WITHHOLD_RATE":
        plan["rate"] = float(settings.withhold_rate)
        plan["rate_source"] = "GEODE_WITHHOLD_RATE"
    return plan


def assignment(salt: str, session: str, crystal_id: str) -> float:
    """The unit's fixed position in [0, 1): below the rate means the withheld arm."""
    import hashlib  # lazily: only a hook that has a crystal to deliver pays for it

    digest = hashlib.sha256(f"{salt}\0{session}\0{crystal_id}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 18446744073709551616.0  # 2**64


def _today_iso(today: object) -> str:
    if today is None:
        return time.strftime("%Y-%m-%d")
    if hasattr(today, "isoformat"):
        return today.isoformat()[:10]
    return str(today)[:10]


def _valid_date(value: str) -> bool:
    return len(value) == 10 and value[4] == "-" and value[7] == "-" and (value[:4] + value[5:7] + value[8:]).isdigit()


def stop_state(plan: dict, withheld_units: int | None, today: object = None) -> tuple[bool, str]:
    """Whether the stop rule has fired: (stopped, reason). ``withheld_units`` None = unknown.

    The date rule fires the day after ``stop_date`` ("after stop_date"). A stop date that is
    not YYYY-MM-DD stops withholding: withholding is the harmful side, so doubt ends it.
    """
    stop_date = plan.get("stop_date")
    if stop_date:
        stop_date = str(stop_date)[:10]
        if not _valid_date(stop_date):
            return True, f"stopped: stop_date {plan.get('stop_date')!r} is not YYYY-MM-DD"
        if _today_iso(today) > stop_date:
            return True, f"stopped: today is after the stop date {stop_date}"
    if withheld_units is not None and withheld_units >= int(plan["stop_units"]):
        return True, f"stopped: {withheld_units} withheld units reached the stop rule of {plan['stop_units']}"
    return False, "running"


def should_withhold(
    settings,
    conn: sqlite3.Connection | None,
    session: str,
    crystal_id: str,
    today: object = None,
    plan: dict | None = None,
) -> tuple[bool, str]:
    """Decide whether to withhold this crystal in this session: (withhold, reason).

    ``conn`` is a sqlite3 connection to the ledger, or None (no database yet, or a PostgreSQL
    ledger the hook does not open): then the plan comes from the settings and the unit count
    of the stop rule cannot be checked (the date rule still applies). Never raises on a
    database error: without the facts it falls back to the deterministic assignment.
    """
    if plan is None:
        plan = load_plan(settings, conn)
    rate = float(plan["rate"])
    if rate <= 0.0:
        return False, f"control arm off (rate 0 from {plan['rate_source']})"
    if not session or not crystal_id:
        return False, "no unit: a session and a crystal id are both needed"
    if conn is not None:
        try:
            if conn.execute(_ALREADY_SQL, (session, crystal_id)).fetchone() is not None:
                return True, "already withheld in this session"
        except sqlite3.Error:
            pass
    u = assignment(plan["salt"], session, crystal_id)
    if u >= rate:
        return False, f"delivered arm ({u:.4f} >= rate {rate:g})"
    units: int | None = None
    if conn is not None:
        try:
            units = int(conn.execute(_UNITS_SQL).fetchone()[0])
        except sqlite3.Error:
            units = None
    stopped, why = stop_state(plan, units, today)
    if stopped:
        return False, why
    if units is None and conn is not None:
        return True, f"withheld arm ({u:.4f} < rate {rate:g}; unit count unreadable)"
    return True, f"withheld arm ({u:.4f} < rate {rate:g})"
