"""``geode doctor``'s look at the last night: did every agent it expected run?

Why: when Redis restarted mid-night the rest of the chain was never sent, the two agents that
ran said ok, and doctor, which checks the agents by running them now, stayed green over a night
that had not finished (issue 22, point 7). The last run kept in the records is judged by
``geode.agents.nights.judge``, as ``geode upkeep --list`` and the page judge it; a partial night
fails this check until a later run finishes.
"""

from __future__ import annotations

from typing import Any


def nights_check(settings, engine) -> tuple[bool, dict[str, Any], str] | None:
    """``(ok, examined, message)`` for the newest kept run, or None when none is kept (or the
    records cannot be read: the ledger check says so)."""
    from sqlalchemy.exc import SQLAlchemyError

    from geode.agents import contract
    from geode.agents.nights import night_states

    if engine is None:
        return None
    try:
        runs = contract.list_runs(engine, limit=400)
    except SQLAlchemyError:
        return None
    if not runs:
        return None
    last = night_states(runs, stale_s=settings.upkeep.visibility_timeout)[0]
    examined = {"run_id": last["run_id"], "expected": len(last["expected"]), "never_ran": last["never_ran"]}
    if last["never_ran"]:
        return (
            False,
            examined,
            (
                f"the last upkeep run {last['run_id']} did not finish: {last['message']}; "
                "run `geode upkeep` (is `geode worker` running, does the broker answer?)"
            ),
        )
    return True, examined, f"the last upkeep run {last['run_id']}: {last['status']} ({last['message']})"
