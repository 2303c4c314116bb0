"""A night's agents: which were expected, which ran, and whether the night finished.

Why: a night is a Celery chain, and the worker sends each next agent only when the one before
it finished. When that send failed (Redis restarting for 5 s, issue 22 point 7) the rest of the
night was simply never sent: ``geode upkeep --list`` showed the two agents that ran, both ok,
and nothing said the Gardener and the Corrector never ran. Now every agent a night expects has
its row in ``upkeep_run`` before the night is sent (status ``queued``, no attempt yet), so what
did not run is in the records too:

- an upkeep task that fails (its agent raised, or the next task could not be sent after
  ``[upkeep] send_retry_s``) marks every agent of its night still queued as failed, never run
  (``mark_never_ran``; the worker's ``task_failure`` handler in ``geode.agents.celery_app``);
- an agent still queued long after the night last moved (the visibility timeout: a message
  Redis still held would have been handed out again by then; a broker restarted without
  persistence lost it) is counted as never run as well, and one still running that long after
  it started as never finished.

An agent marked never run runs when its night is sent again (``geode upkeep --run-id
night-...``): ``recording.begin_attempt`` treats a failure with no attempt as not final.

``judge`` reads one night's rows; the command line (``geode upkeep --list``), the page's health
view and doctor (``geode.services.doctor_nights``) all read it, so they say the same:
``partial: gardener, corrector never ran``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from geode.agents import roster
from geode.agents.contract import FAILED, FINAL_STATUSES, QUEUED, RUNNING, tables
from geode.agents.recording import add_run_row

#: how a night whose agents did not all run is named (the start of its message)
PARTIAL = "partial"


def expect(engine, run_id: str, names: Iterable[str], trigger: str) -> None:
    """A ``queued`` row for each agent the night expects (one already there, from an earlier
    send of this run id, is kept as it is)."""
    run, _f = tables()
    now = time.time()
    with engine.begin() as conn:
        for name in names:
            add_run_row(conn, run, run_id, name, QUEUED, trigger, now)


def forget_expected(engine, run_id: str, names: Iterable[str]) -> None:
    """Remove the ``queued`` rows of a night that could not be sent at all (the sender says so,
    and the night stays open for the next attempt)."""
    from sqlalchemy import delete

    run, _f = tables()
    with engine.begin() as conn:
        conn.execute(
            delete(run).where(
                run.c.run_id == run_id, run.c.agent.in_(list(names)), run.c.status == QUEUED, run.c.attempts == 0
            )
        )


def mark_never_ran(engine, run_id: str, why: str) -> list[str]:
    """Every agent of ``run_id`` still queued is failed, never run, with ``why``. Returns their names."""
    from sqlalchemy import select, update

    run, _f = tables()
    now = time.time()
    with engine.begin() as conn:
        names = [a for (a,) in conn.execute(select(run.c.agent).where(run.c.run_id == run_id, run.c.status == QUEUED))]
        if names:
            conn.execute(
                update(run)
                .where(run.c.run_id == run_id, run.c.status == QUEUED)
                .values(status=FAILED, message=f"never ran: {why}", finished_at=now)
            )
    return names


def _in_order(names: Iterable[str]) -> list[str]:
    rank = {n: i for i, n in enumerate(roster.NAMES)}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


def never_ran(row: Mapping[str, Any], last_moved: float, now: float, stale_s: float) -> bool:
    """An agent that never ran: failed before any attempt (``mark_never_ran``), or still queued
    ``stale_s`` after its night last moved."""
    if row["status"] == FAILED and int(row["attempts"]) == 0:
        return True
    return row["status"] == QUEUED and now - last_moved > stale_s


def judge(rows: Sequence[Mapping[str, Any]], now: float | None = None, stale_s: float = 7200.0) -> dict[str, Any]:
    """One night's state from its ``upkeep_run`` rows (``contract.list_runs`` dicts):
    ``status`` ok | failed | running, the agents ``expected``, ``ran`` and ``never_ran``, and a
    ``message`` (``partial: gardener, corrector never ran`` for a night that did not finish)."""
    now = time.time() if now is None else now
    last_moved = max([float(r["started_at"] or 0) for r in rows] + [float(r["finished_at"] or 0) for r in rows] or [0])
    missing = _in_order(r["agent"] for r in rows if never_ran(r, last_moved, now, stale_s))
    ran = _in_order(r["agent"] for r in rows if r["status"] != QUEUED and r["agent"] not in missing)
    failed = _in_order(r["agent"] for r in rows if r["status"] == FAILED and r["agent"] not in missing)
    # running long past any time limit: its worker died and its message is gone (a broker that
    # restarted without persistence); it started but will never finish
    stuck = _in_order(r["agent"] for r in rows if r["status"] == RUNNING and now - float(r["started_at"]) > stale_s)
    waiting = [r for r in rows if r["status"] not in FINAL_STATUSES and r["agent"] not in missing + stuck]
    if missing or stuck:
        status = FAILED
        message = "; ".join(
            filter(
                None,
                [
                    f"{PARTIAL}: {', '.join(missing)} never ran" if missing else "",
                    f"{'' if missing else PARTIAL + ': '}{', '.join(stuck)} never finished" if stuck else "",
                    f"failed: {', '.join(failed)}" if failed else "",
                ],
            )
        )
    elif failed:
        status, message = FAILED, f"failed: {', '.join(failed)}"
    elif waiting:
        status, message = "running", "waiting for: " + ", ".join(_in_order(r["agent"] for r in waiting))
    else:
        status, message = "ok", f"{len(ran)} agent(s) ran"
    return {
        "run_id": rows[0]["run_id"] if rows else "",
        "status": status,
        "expected": _in_order(r["agent"] for r in rows),
        "ran": ran,
        "never_ran": missing,
        "never_finished": stuck,
        "message": message,
    }


def night_states(runs: Sequence[Mapping[str, Any]], stale_s: float, now: float | None = None) -> list[dict[str, Any]]:
    """``judge`` for each run id of ``runs`` (newest first, as ``contract.list_runs`` gives them)."""
    by_id: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        by_id.setdefault(r["run_id"], []).append(r)
    return [judge(rows, now, stale_s) for rows in by_id.values()]
