"""``geode doctor``: can every part do its job on this store? One small check per part, run in
the order the report lists them; the command line (``geode doctor``, ``geode upkeep``) and the
page's health view (``geode.web.health``) both read :func:`doctor_checks`.

Never green over a store an agent could not read: an agent check passes only when it examined
every note file. The checks of what an agent meets rather than the store (the recall index, the
vectors, the installed hooks, the hook log) are in ``geode.services.doctor_reach``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, TypedDict

from geode.services import (
    doctor_files,
    doctor_index_build,
    doctor_nights,
    doctor_reach,
    doctor_reading,
    doctor_serve,
    doctor_vector_size,
)


class Check(TypedDict):
    """One line of the report (the JSON shape docs/UPKEEP.md documents)."""

    name: str
    ok: bool
    examined: dict[str, Any]
    message: str


def check(name: str, ok: object, examined: dict[str, Any], message: str) -> Check:
    return {"name": name, "ok": bool(ok), "examined": examined, "message": message}


def doctor_checks(
    settings, skip_model: bool = False, project=None, home_dir=None, reports: Mapping[str, Any] | None = None
) -> list[Check]:
    """Each part that must work on this store, and whether it can.

    ``reports``: ``{agent: Report}`` of an upkeep run just made, judged instead of examining the
    store again (``geode upkeep`` fails whenever doctor would)."""
    from geode.agents import contract, upkeep

    counted = contract.census(settings)
    checks = [store_check(settings, counted)]
    checks.append(check("names", *doctor_files.names_check(settings)))
    ledger, engine = ledger_check(settings)
    checks.append(ledger)
    have, missing = upkeep.available(settings)
    checks += agent_checks(settings, engine, counted, have, reports)
    checks += [check("nights", *c) for c in [doctor_nights.nights_check(settings, engine)] if c is not None]
    checks.append(check("reading", *doctor_reading.reading_check(settings, reports)))
    installed = agents_installed_check(have, missing)
    if installed is not None:
        checks.append(installed)
    building = doctor_index_build.building(settings)  # a background first build runs: say only that
    checks += [check("index", *building)] if building else index_checks(settings, counted.notes)
    checks.append(check("recall", *doctor_reach.recall_check(settings, counted.notes)))
    vec = doctor_reach.vectors_check(settings, skip_model)
    if vec is not None:
        checks.append(check("vectors", *vec))
    checks += [check("vector-size", *c) for c in [doctor_vector_size.vector_size_check(settings)] if c]
    hooks = doctor_reach.hooks_check(doctor_reach.hook_files(project, home_dir))
    if hooks is not None:
        checks.append(check("hooks", *hooks))
    checks.append(check("hook-errors", *doctor_reach.hook_errors_check(settings.home)))
    checks += [check("serve-socket", *c) for c in [doctor_serve.serve_socket_check(settings.home)] if c]
    checks += broker_checks(settings)
    if not skip_model:
        model = model_check(settings)
        if model is not None:
            checks.append(model)
    return checks


def store_check(settings, counted) -> Check:
    """The store folders can be read and hold note files the walk can see into."""
    roots = ", ".join(f"{d}={r}" for d, r in settings.domain_roots())
    if counted.missing:
        return check(
            "store", False, {"notes": counted.notes}, "cannot read the store folder of " + ", ".join(counted.missing)
        )
    if counted.notes == 0:
        return check(
            "store", False, {"notes": 0}, f"no note files (.md, .mdc, .markdown) in {roots}: nothing to work on"
        )
    return check(
        "store",
        not counted.unentered,  # a folder the walk cannot see into hides notes from every part
        {"notes": counted.notes, "folders": counted.folders, "unentered": len(counted.unentered)},
        f"{counted.notes} note files in {roots}"
        + (f"; cannot see into {', '.join(counted.unentered)}" if counted.unentered else ""),
    )


def ledger_check(settings) -> tuple[Check, Any]:
    """The records database takes a write (a probe row, removed again); with the engine, or
    None when it cannot be used."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from geode.agents import contract
    from geode.kernel.errors import RecordsError
    from geode.services.invocation import engine_of

    engine = None
    try:
        engine = engine_of(settings)  # a database that cannot be used is a message, not a traceback
        contract.ensure_tables(engine)
        run, _f = contract.tables()
        probe = f"doctor-probe-{os.getpid()}"
        with engine.begin() as conn:
            conn.execute(
                run.insert().values(
                    run_id=probe,
                    agent="doctor",
                    status="running",
                    message="",
                    examined="{}",
                    skipped="[]",
                    proposals="[]",
                    store_notes=0,
                    attempts=0,
                    started_at=0.0,
                    finished_at=0.0,
                    trigger="doctor",
                )
            )
            n = conn.execute(text("SELECT COUNT(*) FROM upkeep_run")).scalar_one()
            conn.execute(run.delete().where(run.c.run_id == probe))
    except (RecordsError, SQLAlchemyError) as exc:
        return check(
            "ledger", False, {}, f"the records database cannot be written: {type(exc).__name__}: {exc}"
        ), engine
    return (
        check(
            "ledger",
            True,
            {"upkeep_runs": int(n) - 1},
            f"the records database takes writes ({settings.db_url.split('@')[-1]})",
        ),
        engine,
    )


def agent_checks(settings, engine, counted, have: list[str], reports: Mapping[str, Any] | None) -> list[Check]:
    """One check per installed agent: it examined every note file, read them all, and did not
    fail. With ``reports``, the upkeep run's reports are judged (an agent it did not run is
    left out); otherwise each agent examines the store now."""
    from geode.agents import contract

    out = []
    ctx = contract.Context(settings, engine, run_id="doctor")
    for name in have:
        if reports is not None:
            if name in reports:
                out.append(_judged_report(name, reports[name], counted.notes))
            continue
        out.append(_examined_now(name, settings, ctx, counted))
    return out


def _judged_report(name: str, rep, notes: int) -> Check:
    """An agent's check from the report of the upkeep run just made."""
    from geode.agents import contract

    unreadable = [f for f in rep.findings if f.kind == "unreadable"]
    ok = rep.status != contract.FAILED and not unreadable and rep.examined.get("notes", 0) == notes
    return check(
        f"agent:{name}",
        ok,
        dict(rep.examined),
        f"examined all {notes} notes"
        if ok
        else rep.message
        if rep.status == contract.FAILED
        else f"examined {rep.examined.get('notes', 0)} of {notes} note files; could not read "
        + ", ".join(f"{f.path}:{f.line}" for f in unreadable[:10]),
    )


def _examined_now(name: str, settings, ctx, counted) -> Check:
    """An agent's check from its ``examine`` of the store, now."""
    from geode.agents import contract, upkeep
    from geode.kernel.errors import GeodeError

    try:
        agent = upkeep.load_agent(name, settings)
        rep = agent.examine(ctx)
        rep.agent = name
    except Exception as exc:  # plugin boundary: a configured agent may raise anything; its check fails with why
        logging.getLogger(__name__).warning(
            "doctor: agent %s failed: %s: %s",
            name,
            type(exc).__name__,
            exc,
            exc_info=not isinstance(exc, GeodeError),
        )
        rep = contract.Report(agent=name, status=contract.FAILED, message=f"{type(exc).__name__}: {exc}")
    contract.apply_rule(rep, counted)
    unreadable = [f for f in rep.findings if f.kind == "unreadable"]
    ok = rep.status != contract.FAILED and not unreadable and rep.examined.get("notes", 0) == counted.notes
    if ok:
        msg = f"examined all {counted.notes} notes"
    elif rep.status == contract.FAILED:
        msg = rep.message
    else:
        msg = (
            f"examined {rep.examined.get('notes', 0)} of {counted.notes} note files; could not read "
            + ", ".join(f"{f.path}:{f.line} ({f.message})" for f in unreadable[:10])
            + (f" and {len(unreadable) - 10} more" if len(unreadable) > 10 else "")
        )
    return check(f"agent:{name}", ok, dict(rep.examined), msg)


def agents_installed_check(have: list[str], missing: list[str]) -> Check | None:
    """Some maintenance agent is installed; the configured ones that cannot be imported are
    named. None when every configured agent is installed."""
    if not have:
        return check("agents", False, {}, "no maintenance agent is installed")
    if missing:
        return check(
            "agents",
            True,
            {"installed": len(have)},
            f"installed: {', '.join(have)}; cannot be imported: {', '.join(missing)}",
        )
    return None


def index_checks(settings, notes: int) -> list[Check]:
    """The binding index holds every note file (``index``) and the hook's reader takes every
    crystal's frontmatter (``hook-reader``)."""
    import sqlite3

    from geode.delivery.index import Index

    try:
        idx = Index(settings, busy_ms=5000)
        try:
            idx.ensure()
            idx.refresh()
            counts = idx.counts()
            unreadable = idx.hook_unreadable()
        finally:
            idx.close()
    except (sqlite3.Error, OSError) as exc:
        return [check("index", False, {}, f"the binding index cannot be read or built: {type(exc).__name__}: {exc}")]
    ok = counts["files"] == notes
    return [
        check(
            "index",
            ok,
            {"files": counts["files"], "crystals": counts["crystals"]},
            f"binding index holds {counts['files']} note files, as the store does"
            if ok
            else f"binding index holds {counts['files']} note files, the store {notes}: run `geode reindex`",
        ),
        check("hook-reader", *doctor_reach.hook_reader_check(unreadable, counts["crystals"])),
    ]


def broker_checks(settings) -> list[Check]:
    """The configured Celery broker answers (``broker``), and then a worker serves the queue
    (``workers``)."""
    from geode.agents.celery_app import make_app, ping
    from geode.kernel.errors import GeodeError

    try:
        capp = make_app(settings=settings)
        ok, msg = ping(capp)
        out = [check("broker", ok, {}, msg)]
        if ok:
            out.append(check("workers", *doctor_reach.workers_check(capp)))
        return out
    except GeodeError as exc:  # CeleryConfigError, raised when the app is configured at import
        return [check("broker", False, {}, f"the Celery configuration is unusable: {exc}")]


def model_check(settings) -> Check | None:
    """The embedding model loads and embeds one question; None when the recall stack that
    holds it is not installed."""
    import importlib.util

    if importlib.util.find_spec("geode.recall.embed") is None:
        return None
    from geode.recall.embed import ModelUnavailable, get_embedder

    try:
        emb = get_embedder(settings)
        vec = emb.embed_query("doctor: can the model embed one question?")
    except (ModelUnavailable, ValueError, RuntimeError) as exc:  # not installed, unknown, or failing to embed
        return check("model", False, {}, f"the embedding model does not load: {type(exc).__name__}: {exc}")
    ok = len(vec) == emb.dim and emb.dim > 0
    return check(
        "model",
        ok,
        {"dim": emb.dim},
        f"{emb.model_id} loads and embeds ({emb.dim} dimensions)"
        if ok
        else f"{emb.model_id} returned {len(vec)} values, expected {emb.dim}",
    )
