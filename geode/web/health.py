"""Health as the page reads it: the last nights (each agent's status, what it examined, found
and proposed), ``geode doctor``'s checks, the delivery statistics and the control arm's study.

The reports are the terminal's own (``geode.services.doctor.doctor_checks``,
``geode.evidence.stats.compute_stats``, ``geode.evidence.study.compute_study``), so the page and
the terminal can never disagree. ``doctor`` runs every agent over the whole store and writes a
probe row into the records to prove they take writes, so the page runs it on a POST (a button),
never on a GET.
"""

from __future__ import annotations

from geode.agents import contract
from geode.evidence.results import Stats, Study
from geode.web.queue import iso, night_label

NIGHT_RUN_ROWS = 400


def nights(engine, limit: int = 7, stale_s: float = 7200.0) -> list[dict]:
    """The last ``limit`` runs (nights or manual runs), newest first, each with its agents and
    its state (``geode.agents.nights.judge``; ``stale_s``: ``[upkeep] visibility_timeout``)."""
    contract.ensure_tables(engine)
    runs = contract.list_runs(engine, limit=NIGHT_RUN_ROWS)
    out: list[dict] = []
    by_id: dict[str, dict] = {}
    for r in runs:
        n = by_id.get(r["run_id"])
        if n is None:
            if len(out) >= limit:
                continue
            n = by_id[r["run_id"]] = {
                "run_id": r["run_id"],
                "label": night_label(r["run_id"], r["started_at"]),
                "started_at": iso(r["started_at"]),
                "agents": [],
                "status": "ok",
            }
            out.append(n)
        n["agents"].append(
            {
                "agent": r["agent"],
                "status": r["status"],
                "message": r["message"],
                "examined": r["examined"],
                "findings": r["findings"],
                "proposals": r["proposals"],
                "attempts": r["attempts"],
                "trigger": r["trigger"],
                "started_at": iso(r["started_at"]),
                "finished_at": iso(r["finished_at"] or None),
            }
        )
        if r["status"] == contract.FAILED:
            n["status"] = "failed"
        elif r["status"] not in contract.FINAL_STATUSES and n["status"] != "failed":
            n["status"] = "running"
    from geode.agents.nights import judge

    rows_of: dict[str, list[dict]] = {}
    for r in runs:
        rows_of.setdefault(r["run_id"], []).append(r)
    for n in out:
        n["agents"].sort(key=lambda a: a["agent"])
        # the night as a whole, as `geode upkeep --list` and doctor judge it: one whose agents did
        # not all run is failed ("partial: gardener, corrector never ran")
        state = judge(rows_of[n["run_id"]], stale_s=stale_s)
        n["status"], n["message"], n["never_ran"] = state["status"], state["message"], state["never_ran"]
    return out


def stats(settings, engine, days: float | None = None) -> Stats:
    from geode.evidence.stats import compute_stats
    from geode.services.crystals import registered_crystals

    ids, oversize = registered_crystals(settings)
    return compute_stats(settings, engine, ids, oversize, days=days)


def study(settings, engine) -> Study:
    from geode.evidence.study import compute_study

    return compute_study(settings, engine)


def doctor(settings, skip_model: bool = True) -> dict:
    from geode.services.doctor import doctor_checks

    checks = doctor_checks(settings, skip_model=skip_model)
    return {"ok": bool(checks) and all(c["ok"] for c in checks), "checks": checks, "skip_model": skip_model}
