"""Recording an upkeep run as the worker runs it: one more attempt counted before any work (a
redelivered task that already finished is a no-op; one that died too often is marked failed),
the findings upserted by their stable key, and the finished report written.

Apart from ``geode.agents.contract`` (the types, the tables and reading runs back) because only
the worker's ``run_agent`` writes runs, while the command line, the page and the Corrector read
them.
"""

from __future__ import annotations

import json
import time

from geode.agents.contract import (
    FAILED,
    FINAL_STATUSES,
    HELD_BACK_KEY,
    RUNNING,
    Finding,
    Report,
    report_from_row,
    tables,
)


def _insert(conn):
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


MAX_ATTEMPTS = 3


def add_run_row(conn, run, run_id: str, agent: str, status: str, trigger: str, now: float) -> None:
    """Insert the empty run row of ``(run_id, agent)`` unless one is there already.

    A night's expected agents (``geode.agents.nights.expect``) and an attempt's start
    (``begin_attempt``) both create it, whichever comes first; the other keeps the row it finds.
    """
    ins = _insert(conn)(run).values(
        run_id=run_id,
        agent=agent,
        status=status,
        message="",
        examined="{}",
        skipped="[]",
        proposals="[]",
        store_notes=0,
        attempts=0,
        started_at=now,
        finished_at=0.0,
        trigger=trigger,
    )
    conn.execute(ins.on_conflict_do_nothing(index_elements=["run_id", "agent"]))


def begin_attempt(engine, run_id: str, agent: str, trigger: str = "", max_attempts: int = MAX_ATTEMPTS):
    """Count one more attempt of ``(run_id, agent)`` before any work is done.

    Returns ``("run", attempts)`` when the caller should run the agent, ``("done", report)``
    when the run already finished (a redelivered task is then a no-op), and
    ``("exhausted", report)`` when this delivery would be attempt ``max_attempts + 1``: the run
    is marked failed without running (a task that kills its worker is not retried forever).
    """
    from sqlalchemy import select, update

    run, _finding = tables()
    now = time.time()
    with engine.begin() as conn:
        add_run_row(conn, run, run_id, agent, RUNNING, trigger, now)
        q = select(run).where(run.c.run_id == run_id, run.c.agent == agent)
        if conn.dialect.name == "postgresql":
            q = q.with_for_update()
        row = conn.execute(q).mappings().one()
        # an agent marked never run (failed before any attempt: ``geode.agents.nights``) runs
        # when its night is sent again; every other final status is the run's last word
        if row["status"] in FINAL_STATUSES and not (row["status"] == FAILED and int(row["attempts"]) == 0):
            return "done", report_from_row(row, conn)
        attempts = int(row["attempts"]) + 1
        if attempts > max_attempts:
            msg = (
                f"gave up after {max_attempts} attempts: the task died each time before it finished "
                "(a killed or crashing worker, a time limit); see the worker's log"
            )
            conn.execute(
                update(run)
                .where(run.c.id == row["id"])
                .values(status=FAILED, message=msg, attempts=attempts, finished_at=now)
            )
            row = conn.execute(select(run).where(run.c.id == row["id"])).mappings().one()
            return "exhausted", report_from_row(row, conn)
        conn.execute(update(run).where(run.c.id == row["id"]).values(attempts=attempts, status=RUNNING, started_at=now))
        return "run", attempts


def store_findings(engine, run_id: str, agent: str, findings: list[Finding]) -> None:
    """Upsert the run's findings by their stable key (a rerun keeps ids), drop the ones gone."""
    from sqlalchemy import delete, select

    _run, finding = tables()
    by_key: dict[str, Finding] = {}
    for f in findings:
        by_key.setdefault(f.key, f)
    with engine.begin() as conn:
        existing = {
            r.key: r.id
            for r in conn.execute(
                select(finding.c.key, finding.c.id).where(finding.c.run_id == run_id, finding.c.agent == agent)
            )
        }
        stale = [fid for key, fid in existing.items() if key not in by_key]
        for start in range(0, len(stale), 500):
            conn.execute(delete(finding).where(finding.c.id.in_(stale[start : start + 500])))
        rows = [
            {
                "run_id": run_id,
                "agent": agent,
                "key": key,
                "kind": f.kind,
                "domain": f.domain,
                "path": f.path,
                "line": int(f.line),
                "target": f.target,
                "message": f.message,
                "suggestion": f.suggestion,
                "severity": f.severity,
            }
            for key, f in by_key.items()
            if key not in existing
        ]
        for start in range(0, len(rows), 500):
            conn.execute(finding.insert(), rows[start : start + 500])
        ids = {
            r.key: r.id
            for r in conn.execute(
                select(finding.c.key, finding.c.id).where(finding.c.run_id == run_id, finding.c.agent == agent)
            )
        }
    for f in findings:
        f.id = ids.get(f.key)


def finish_run(engine, report: Report) -> None:
    """Write the finished report: from here on a redelivered task is a no-op."""
    from sqlalchemy import update

    run, _finding = tables()
    with engine.begin() as conn:
        conn.execute(
            update(run)
            .where(run.c.run_id == report.run_id, run.c.agent == report.agent)
            .values(
                status=report.status,
                message=report.message,
                examined=json.dumps(
                    {**report.examined, **({HELD_BACK_KEY: report.held_back} if report.held_back else {})},
                    sort_keys=True,
                ),
                skipped=json.dumps([s.as_dict() for s in report.skipped]),
                proposals=json.dumps(report.proposals),
                store_notes=int(report.store_notes),
                finished_at=report.finished_at or time.time(),
            )
        )
