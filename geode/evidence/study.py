"""``geode study``: the control arm's two groups side by side.

Why: a delivery count cannot say whether a crystal helped; a comparison with crystals withheld
at random can. The unit is one crystal in one session. The outcome is the lookup we can see:
``blocked`` and ``lookup_marked`` events later in the same session. Silence on a channel we do
not watch stays silence; it is not read as "the agent never looked".

Exempt units (a crystal whose binding says ``control: never``) were never assigned to an arm,
so they are in neither: a safety note delivered every time would make the delivered arm look
like whatever safety notes do. They are counted in a third column, ``exempt``, with the same
outcome figures, so exemption shows in the evidence rather than silently shrinking it.

Known confounds, stated rather than hidden: a lookup after a unit is counted for every unit of
that session that preceded it (units in one session are not independent), and a withheld
crystal frees budget for its neighbours, so the two arms are not perfectly separate.
"""

from __future__ import annotations

import bisect
import time
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine

from geode.delivery import control
from geode.evidence.results import Study
from geode.evidence.stats import LOOKUP_KINDS, not_manual, with_connection
from geode.kernel.config import Settings
from geode.records.models import ControlPlan, LedgerEvent, table_of

ARMS = ("delivered", "withheld")
#: the column beside the two arms: units whose deliveries were exempt from the control arm
EXEMPT = "exempt"


def compute_study(settings: Settings, engine_or_conn: Engine | Connection, today: object = None) -> Study:
    """The study's state. JSON shape::

    {
      "arms": {
        "delivered": {"units": int, "lookups": int, "blocked": int, "marked": int,
                      "units_with_lookup": int, "lookups_per_unit": float|None},
        "withheld":  {...same...},
        "exempt":    {...same...}   # units never assigned: the crystal says `control: never`
      },
      "exempt_crystals": int,  # distinct crystals among the exempt units
      "mixed_units": int,      # units with both delivered and withheld events (a plan change
                               # mid-session); counted in the arm of their first event
      "sessions": int,         # sessions holding at least one unit
      "plan": {
        "recorded": {"rate", "stop_units", "stop_date", "salt_set": bool, "created_at",
                     "source"} | None,
        "current": {"rate", "rate_source", "stop_units", "stop_date"},
        "in_force": {"rate", "stop_units", "stop_date"},   # what the hook applies
        "differs": [str],      # fields where the current config differs from the record
        "withheld_units_total": int,
        "stopped": bool, "stop_reason": str
      }
    }
    """
    t = table_of(LedgerEvent)
    p = table_of(ControlPlan)

    def go(conn: Connection) -> Study:
        first = conn.execute(
            select(t.c.session, t.c.crystal_id, t.c.kind, func.min(t.c.ts))
            .where(t.c.kind.in_(ARMS), t.c.session != "", t.c.crystal_id != "", not_manual())
            .group_by(t.c.session, t.c.crystal_id, t.c.kind)
        ).all()
        units: dict[tuple[str, str], dict[str, float]] = {}
        for session, crystal_id, kind, ts in first:
            units.setdefault((session, crystal_id), {})[kind] = float(ts)
        exempt_units = {
            (s, c)
            for s, c in conn.execute(
                select(t.c.session, t.c.crystal_id)
                .where(
                    t.c.kind == "delivered",
                    t.c.detail == control.EXEMPT_DETAIL,
                    t.c.session != "",
                    t.c.crystal_id != "",
                    not_manual(),
                )
                .distinct()
            ).all()
        }
        lookups: dict[str, list[tuple[float, str]]] = {}
        for session, kind, ts in conn.execute(
            select(t.c.session, t.c.kind, t.c.ts).where(t.c.kind.in_(LOOKUP_KINDS), t.c.session != "", not_manual())
        ).all():
            lookups.setdefault(session, []).append((float(ts), kind))
        for events in lookups.values():
            events.sort()

        arms: dict[str, dict] = {
            a: {"units": 0, "lookups": 0, "blocked": 0, "marked": 0, "units_with_lookup": 0} for a in (*ARMS, EXEMPT)
        }
        mixed = 0
        for (session, _cid), kinds in units.items():
            if len(kinds) > 1:
                mixed += 1
            arm = min(kinds, key=lambda k: (kinds[k], k))
            t0 = kinds[arm]
            if arm == "delivered" and (session, _cid) in exempt_units:
                arm = EXEMPT  # never assigned: beside the arms, not in the delivered one
            after = lookups.get(session, [])
            # strictly after the unit's first event: (t0, "~") sorts after any kind at t0
            later = after[bisect.bisect_right(after, (t0, "~")) :]
            a = arms[arm]
            a["units"] += 1
            a["lookups"] += len(later)
            a["blocked"] += sum(1 for _, k in later if k == "blocked")
            a["marked"] += sum(1 for _, k in later if k == "lookup_marked")
            a["units_with_lookup"] += 1 if later else 0
        for a in arms.values():
            a["lookups_per_unit"] = round(a["lookups"] / a["units"], 4) if a["units"] else None

        rec_row = conn.execute(select(p).order_by(p.c.id).limit(1)).mappings().first()
        recorded = dict(rec_row) if rec_row is not None else None
        withheld_total = len([1 for k in units.values() if "withheld" in k])
        current: dict[str, Any] = {
            "rate": float(settings.withhold_rate),
            "rate_source": settings.withhold_rate_source,
            "stop_units": int(settings.stop_units),
            "stop_date": settings.stop_date,
        }
        differs: list[str] = []
        if recorded is not None:
            if abs(float(recorded["rate"]) - current["rate"]) > 1e-12:
                differs.append("rate")
            if int(recorded["stop_units"]) != current["stop_units"]:
                differs.append("stop_units")
            if (recorded["stop_date"] or None) != (current["stop_date"] or None):
                differs.append("stop_date")
            if settings.control_salt and settings.control_salt != recorded["salt"]:
                differs.append("salt")
        in_force: dict[str, Any] = {
            "rate": float(recorded["rate"]) if recorded else current["rate"],
            "stop_units": int(recorded["stop_units"]) if recorded else current["stop_units"],
            "stop_date": (recorded["stop_date"] if recorded else current["stop_date"]),
        }
        if settings.withhold_rate_source == "GEODE_WITHHOLD_RATE":
            in_force["rate"] = current["rate"]
        stopped, reason = control.stop_state(in_force, withheld_total, today)
        if in_force["rate"] <= 0:
            stopped, reason = True, "off: the rate in force is 0"
        return {
            "arms": arms,
            "mixed_units": mixed,
            "exempt_crystals": len({c for s, c in exempt_units}),
            "sessions": len({s for s, _ in units}),
            "plan": {
                "recorded": (
                    {
                        "rate": float(recorded["rate"]),
                        "stop_units": int(recorded["stop_units"]),
                        "stop_date": recorded["stop_date"],
                        "salt_set": bool(recorded["salt"]),
                        "created_at": float(recorded["created_at"]),
                        "source": recorded["source"],
                    }
                    if recorded
                    else None
                ),
                "current": current,
                "in_force": in_force,
                "differs": differs,
                "withheld_units_total": withheld_total,
                "stopped": stopped,
                "stop_reason": reason,
            },
        }

    return with_connection(engine_or_conn, go)


def render_study(d: Study) -> str:
    """Plain text: the arms side by side, then the plan and whether it still holds."""
    a, w = d["arms"]["delivered"], d["arms"]["withheld"]
    e = d["arms"].get(EXEMPT) or {k: 0 for k in a}

    def f(v: object) -> str:
        return "n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))

    rows = [
        ("units (crystal x session)", "units"),
        ("lookups after the unit", "lookups"),
        ("  blocked", "blocked"),
        ("  marked", "marked"),
        ("units followed by a lookup", "units_with_lookup"),
        ("lookups per unit", "lookups_per_unit"),
    ]
    width = max(len(r[0]) for r in rows)
    out = [f"{'':<{width}}  {'delivered':>10}  {'withheld':>10}  {'exempt':>10}"]
    out += [f"{label:<{width}}  {f(a[k]):>10}  {f(w[k]):>10}  {f(e.get(k)):>10}" for label, k in rows]
    if e.get("units"):
        out.append(
            f"exempt: {e['units']} unit(s) of {d.get('exempt_crystals', 0)} crystal(s) marked `control: never`, "
            "never withheld and so in neither arm."
        )
    if d["mixed_units"]:
        out.append(f"{d['mixed_units']} unit(s) have both delivered and withheld events (counted by their first).")
    plan = d["plan"]
    out.append("")
    inf = plan["in_force"]
    stop = f"{inf['stop_units']} units" + (f" or after {inf['stop_date']}" if inf["stop_date"] else "")
    out.append(f"plan: withhold {100 * inf['rate']:.1f}% of units; stop at {stop}")
    if plan["recorded"] is None:
        out.append("no plan recorded yet (it is written when the ledger is created)")
    else:
        out.append(f"recorded {time.strftime('%Y-%m-%d', time.localtime(plan['recorded']['created_at']))}")
    if plan["differs"]:
        out.append(
            "the current config differs from the recorded plan in: " + ", ".join(plan["differs"]) + " (the record wins)"
        )
    if plan["current"]["rate_source"] == "GEODE_WITHHOLD_RATE":
        out.append(f"GEODE_WITHHOLD_RATE overrides the rate: {plan['current']['rate']:g}")
    out.append(f"withheld units so far: {plan['withheld_units_total']} of {inf['stop_units']}")
    reason = plan["stop_reason"]
    if plan["stopped"]:
        out.append("STOPPED: " + reason.removeprefix("stopped: "))
    else:
        out.append(
            "the control arm is running"
            + (f": {reason.removeprefix('running').lstrip(': ')}" if reason.removeprefix("running").strip() else "")
        )
    if a["units"] == 0 or w["units"] == 0:
        out.append("One arm is empty: there is nothing to compare yet.")
    out.append("Outcome = lookups we can see (blocked or marked); an unwatched channel stays silent.")
    return "\n".join(out)
