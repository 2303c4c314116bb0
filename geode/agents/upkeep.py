"""An upkeep run: the agents in their order, each held to the contract, reports kept.

The order is the Librarian, the Cleaner, the Gardener, the Corrector: the Corrector acts on
the findings the other three stored in the same run (``Context.prior_findings``), it never
calls them.

Why the agents are named here by string and not imported: imports point one way
(``delivery`` <- ``agents`` <- the four agents), so the shared room looks agents up by their
module path at run time, like a plugin table. ``[upkeep] agents`` in ``geode.toml`` may add
more (``name = "module:Class"``); the tests add a poison agent that way.

Idempotent by run id: ``(run_id, agent)`` is one row of ``upkeep_run``; an attempt is counted
before any work, findings are upserted by a stable key, proposals are filed with
``(run_id, key)`` so a rerun files none twice, and the finished report is written last.
Across runs, ``geode.agents.filing.screen`` holds back a draft already pending, rejected or
undone with the same evidence, and keeps out of the queue a draft that would break links. A run
that already finished is returned as it was; one that died three times is marked failed.
"""

from __future__ import annotations

import importlib
import logging
import time
import uuid

from geode.agents import filing, roster
from geode.agents.contract import FAILED, Agent, Context, Report, apply_rule, census, ensure_tables, load_findings
from geode.agents.recording import MAX_ATTEMPTS, begin_attempt, finish_run, store_findings
from geode.kernel.errors import GeodeError, NotFoundError

#: the built-in agents in the order they run, and where each lives (``geode.agents.roster``)
ORDER = roster.NAMES
BUILTIN = dict(roster.ROSTER)


class UnknownAgent(NotFoundError, LookupError):
    """No agent by that name, or its module is not installed."""


def registry(settings=None) -> dict[str, str]:
    reg = dict(BUILTIN)
    if settings is not None:
        reg.update(settings.upkeep.agents)  # [upkeep] agents, checked by load_settings
    return reg


def order(settings=None) -> list[str]:
    reg = registry(settings)
    return [n for n in ORDER if n in reg] + sorted(n for n in reg if n not in ORDER)


def _find_spec(spec: str):
    mod_name, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        if exc.name and (mod_name == exc.name or mod_name.startswith(exc.name + ".")):
            return None
        raise
    return getattr(mod, attr or "Agent")


def load_agent(name: str, settings=None) -> Agent:
    reg = registry(settings)
    if name not in reg:
        raise UnknownAgent(f"no agent named {name!r}; known: {', '.join(order(settings))}")
    cls = _find_spec(reg[name])
    if cls is None:
        raise UnknownAgent(f"agent {name!r} is not installed ({reg[name]} cannot be imported)")
    agent = cls()
    agent.name = name
    return agent


def available(settings=None) -> tuple[list[str], list[str]]:
    """``(installed agent names in run order, names whose module is not there)``."""
    have: list[str] = []
    missing: list[str] = []
    for name in order(settings):
        try:
            cls = _find_spec(registry(settings)[name])
        except Exception as exc:  # plugin boundary: a configured agent module may raise anything on import
            logging.getLogger(__name__).warning(
                "agent %r cannot be loaded, counted as not installed: %s: %s",
                name,
                type(exc).__name__,
                exc,
                exc_info=True,
            )
            cls = None
        (have if cls is not None else missing).append(name)
    return have, missing


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def file_one(settings, engine, draft):
    """File one proposal (a seam the crash tests wrap). Returns its id, or None when filed before."""
    from geode.queue.proposals import file_proposal

    return file_proposal(settings, engine, draft)


def _proposal_id(engine, run_id: str, key: str) -> int | None:
    from geode.queue.proposals import list_proposals

    for p in list_proposals(engine, run_id=run_id):
        if p["key"] == key:
            return int(p["id"])
    return None


def run_agent(
    settings,
    engine,
    run_id: str,
    name: str,
    trigger: str = "manual",
    max_attempts: int = MAX_ATTEMPTS,
    agent: Agent | None = None,
) -> Report:
    """Run one agent for ``run_id`` exactly once (a rerun returns the stored report). ``agent``:
    an instance to run under ``name`` instead of the registry's (``geode drafts`` runs the
    Gardener's capture rule alone this way, through the same gate into the queue)."""
    from sqlalchemy.exc import SQLAlchemyError

    from geode.queue.proposals import ProposalError
    from geode.queue.safepath import UnsafePath

    ensure_tables(engine)
    state, value = begin_attempt(engine, run_id, name, trigger, max_attempts)
    if state != "run":
        return value
    attempts = value
    started = time.time()
    prior = load_findings(engine, run_id)
    ctx = Context(settings, engine, run_id, prior)
    try:
        if agent is None:
            agent = load_agent(name, settings)
        report = agent.examine(ctx)
        report.agent = name
    except Exception as exc:  # plugin boundary and worker task wrapper: a failed run with the reason, never silence
        logging.getLogger(__name__).warning(
            "agent %s failed in run %s: %s: %s",
            name,
            run_id,
            type(exc).__name__,
            exc,
            exc_info=not isinstance(exc, GeodeError),
        )
        report = Report(agent=name, status=FAILED, message=f"{type(exc).__name__}: {exc}")
        report.examined.setdefault("notes", 0)
    report.run_id, report.attempts, report.started_at = run_id, attempts, started
    apply_rule(report, census(settings))
    if report.status == FAILED and report.proposed:
        # What a run could not see it cannot judge: a failed run files nothing, and keeps only
        # the findings about what it could not read (a person acts on those first).
        held = len(report.proposed)
        report.proposed = []
        report.findings = [f for f in report.findings if f.kind == "unreadable"]
        report.message = "; ".join(filter(None, [report.message, f"{held} proposal(s) not filed: the run failed"]))
    elif report.status == FAILED:
        report.findings = [f for f in report.findings if f.kind == "unreadable"]
    # the one gate: held back when filed before with the same evidence, never filed when it would
    # break a link that resolves today (a finding for a person instead); geode.agents.filing
    filing.screen(ctx, name, report)
    store_findings(engine, run_id, name, report.findings)
    report.proposals = []
    problems = []
    for prop in report.proposed:
        draft = prop.draft
        draft.run_id = run_id
        draft.evidence = [{"finding": f.id} for f in prop.findings if f.id is not None] + [
            {"ledger_event": e} for e in prop.ledger_events
        ]
        try:
            pid = file_one(settings, engine, draft)
            if pid is None:
                pid = _proposal_id(engine, run_id, draft.key)
        # a conflict, a bad draft, a refused path or the queue failing: reported, the others still filed
        except (ProposalError, UnsafePath, OSError, SQLAlchemyError) as exc:
            problems.append(f"{draft.key}: {exc}")
            continue
        report.proposals.append(
            {
                "id": pid,
                "kind": draft.kind,
                "paths": [c.path for c in draft.changes],
                "domain": draft.domain,
                "title": draft.title,
            }
        )
    if problems:
        report.message = "; ".join(
            filter(None, [report.message, f"{len(problems)} proposal(s) not filed: " + "; ".join(problems[:5])])
        )
    report.finished_at = time.time()
    finish_run(engine, report)
    return report


def run_upkeep(
    settings, engine, run_id: str | None = None, agents: list[str] | None = None, trigger: str = "manual"
) -> list[Report]:
    """Run the installed agents (or ``agents``) in their order, in this process."""
    run_id = run_id or new_run_id()
    names = agents or available(settings)[0]
    prune_hook_sessions(settings)
    return [run_agent(settings, engine, run_id, n, trigger) for n in names]


def prune_hook_sessions(settings) -> int:
    """Prune the binding index's per-session table (``Index.prune_sessions``) where the hook
    never does: a nightly run keeps a long-used home as fast as a fresh one (issue 25). Best
    effort: a missing or busy index is pruned next time; returns the sessions dropped."""
    import os
    import sqlite3

    from geode.delivery.index import Index, index_path

    if not os.path.exists(index_path(settings)):
        return 0
    try:
        idx = Index(settings, busy_ms=2000)
        try:
            return idx.prune_sessions()
        finally:
            idx.close()
    except sqlite3.Error:
        return 0
