"""``geode upkeep``, ``geode drafts``, ``geode worker``, ``geode scheduler``, ``geode doctor``.

Heavy imports (SQLModel, Celery, APScheduler) happen inside the command functions, so the
rest of the CLI stays quick. JSON shapes are documented in docs/UPKEEP.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from geode.services.invocation import print_json, settings_of

EXIT_OK, EXIT_FAILED = 0, 1


def _engine(settings):
    from geode.agents.contract import ensure_tables
    from geode.services.invocation import engine_of

    engine = engine_of(settings)  # a database that cannot be used is a message, not a traceback
    ensure_tables(engine)
    return engine


def register(sub, common) -> None:
    s = sub.add_parser("upkeep", parents=[common], help="run the maintenance agents now and print their reports")
    s.add_argument("--agent", action="append", metavar="NAME", help="only this agent (repeatable)")
    s.add_argument("--list", action="store_true", help="list the kept upkeep reports")
    s.add_argument("--run-id", metavar="ID", help="the run id (a rerun of a finished id prints its kept report)")
    s.add_argument("--limit", type=int, default=50, help="with --list: how many reports")
    s.add_argument("--in-process", action="store_true", help="run here even when a broker is configured")
    s.add_argument("--wait", type=float, default=600.0, help="with a broker: seconds to wait for the workers")
    s.set_defaults(func=cmd_upkeep)

    s = sub.add_parser(
        "drafts",
        parents=[common],
        help="file the failed-then-fixed drafts the hook kept into the approval queue (docs/CAPTURE.md)",
    )
    s.add_argument("--session", metavar="ID", help="only the pairs of this session (default: every session kept)")
    s.set_defaults(func=cmd_drafts)

    s = sub.add_parser("worker", parents=[common], help="start a Celery worker for the upkeep tasks (needs a broker)")
    s.add_argument("--concurrency", type=int, default=1, help="tasks run at once (default 1)")
    s.add_argument("--loglevel", default="INFO", help="Celery's log level (default INFO)")
    s.set_defaults(func=cmd_worker)

    s = sub.add_parser("scheduler", parents=[common], help="start the nightly upkeep scheduler (one per store)")
    s.set_defaults(func=cmd_scheduler)

    s = sub.add_parser("doctor", parents=[common], help="can every part do its job on this store? (exit 1 if not)")
    s.add_argument("--skip-model", action="store_true", help="do not load the embedding model")
    s.add_argument(
        "--project", metavar="DIR", help="the project whose installed hooks are checked (default: the current folder)"
    )
    s.add_argument("--home-dir", metavar="DIR", help=argparse.SUPPRESS)
    s.set_defaults(func=cmd_doctor)


# -- drafts ---------------------------------------------------------------------------------
def cmd_drafts(args) -> int:
    """The Gardener's capture rule alone, through the same gate into the queue as a night's run:
    one draft per failed-then-fixed pair, none for a pair already pending, approved or rejected."""
    settings = settings_of(args)
    engine = _engine(settings)
    from geode.agents import upkeep
    from geode.gardener.agent import Gardener

    run_id = upkeep.new_run_id("drafts")
    report = upkeep.run_agent(
        settings, engine, run_id, "gardener", trigger="drafts", agent=Gardener(capture_only=True, session=args.session)
    )
    drafts = [p for p in report.proposals if p["kind"] == "new_note"]
    if args.json:
        print_json({"run_id": run_id, "status": report.status, "drafts": drafts, "message": report.message})
    else:
        print(f"geode drafts: {report.message}")
        for p in drafts:
            print(f"  proposal {p['id']}: {p['title']}")
        if drafts:
            print(
                "finish each: read it with `geode proposals show <id>`, then `geode proposals approve <id>` "
                "and write the essence in the new file, or `geode proposals reject <id>`"
            )
        elif report.examined.get("capture_pairs"):
            print("  (every pair is already in the queue, approved or rejected)")
    return EXIT_FAILED if report.status == "failed" else EXIT_OK


# -- upkeep ---------------------------------------------------------------------------------
def _when(ts) -> str:
    """An epoch time an agent counted in (``window_first_ts``) as a person reads it."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(ts)))
    except (TypeError, ValueError, OverflowError, OSError):
        return str(ts)


def render_report(report: Mapping[str, Any]) -> str:
    ex = report["examined"]
    lines = [
        f"== {report['agent']}: {report['status'].upper()}" + (f" ({report['message']})" if report["message"] else "")
    ]
    lines.append(
        "   examined "
        + ", ".join(
            f"{k.removesuffix('_ts')} {_when(v) if k.endswith('_ts') else v}"
            for k, v in ex.items()
            if v or k == "notes"
        )
        + f"  (the store holds {report.get('store_notes', 0)} note files)"
    )
    by_kind: dict[str, int] = {}
    for f in report["findings"]:
        by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + 1
    lines.append(
        f"   found {len(report['findings'])}"
        + (": " + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items())) if by_kind else "")
    )
    for f in report["findings"][:200]:
        sugg = f"  -> {f['suggestion']}" if f.get("suggestion") else ""
        where = f"{f['domain']}:" if f.get("domain") else ""
        lines.append(f"   {where}{f['path']}:{f['line']}: {f['kind']}: {f['message']}{sugg}")
    if len(report["findings"]) > 200:
        lines.append(f"   ... {len(report['findings']) - 200} more (use --json)")
    if report.get("skipped"):
        reasons: dict[str, int] = {}
        for s in report["skipped"]:
            reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
        lines.append(f"   skipped {len(report['skipped'])}: " + "; ".join(f"{n} x {r}" for r, n in reasons.items()))
    lines.append(
        f"   proposed {len(report['proposals'])}"
        + "".join(f"\n   #{p['id']} {p['kind']} {', '.join(p['paths'])}" for p in report["proposals"])
    )
    held = report.get("held_back") or {}
    if held:
        lines.append(
            f"   held back {sum(held.values())}: "
            + ", ".join(f"{HELD_SAID.get(k, k)} {v}" for k, v in sorted(held.items()))
        )
    return "\n".join(lines)


#: what each reason a draft was held back means, as the report says it (docs/UPKEEP.md)
HELD_SAID = {
    "pending": "already pending",
    "rejected": "rejected before",
    "undone": "undone before",
    "would-break-links": "would break links (see the findings)",
}


def _wait_for(engine, run_id: str, names: list[str], timeout: float) -> list:
    from geode.agents.contract import FINAL_STATUSES, get_report

    deadline = time.monotonic() + timeout
    while True:
        reports = [get_report(engine, run_id, n) for n in names]
        if all(r is not None and r.status in FINAL_STATUSES for r in reports):
            return reports
        if time.monotonic() > deadline:
            return reports
        time.sleep(0.5)


def cmd_upkeep(args) -> int:
    settings = settings_of(args)
    engine = _engine(settings)
    from geode.agents import contract, upkeep
    from geode.services.invocation import CLIError

    if args.list:
        if args.run_id:
            runs = [r for r in contract.list_runs(engine, limit=100000) if r["run_id"] == args.run_id]
            stored = [contract.get_report(engine, args.run_id, r["agent"]) for r in runs]
            if args.json:
                print_json({"runs": [r.as_dict() for r in stored if r]})
            else:
                print("\n".join(render_report(r.as_dict()) for r in stored if r) or f"no run {args.run_id}")
            return EXIT_OK
        runs = contract.list_runs(engine, limit=args.limit)
        from geode.agents.nights import night_states  # a night whose agents did not all run is failed

        states = night_states(runs, stale_s=settings.upkeep.visibility_timeout)
        if args.json:
            print_json({"reports": runs, "nights": states})
        else:
            if not runs:
                print("no upkeep reports kept yet")
            for r in runs:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["started_at"]))
                print(
                    f"{when}  {r['run_id']:<34} {r['agent']:<10} {r['status']:<16} "
                    f"notes {r['examined'].get('notes', 0):>6}  findings {r['findings']:>5}  "
                    f"proposals {r['proposals']:>3}  {r['message'][:80]}"
                )
            for st in states:
                if st["status"] != "ok":
                    print(f"{st['run_id']}: {st['status'].upper()} ({st['message']})")
        return EXIT_OK

    have, missing = upkeep.available(settings)
    names = args.agent or have
    for n in names:
        if n not in upkeep.registry(settings):
            raise CLIError(f"no agent named {n!r}; known: {', '.join(upkeep.order(settings))}", 2)
        if n not in have:
            raise CLIError(f"agent {n!r} is not installed (its module cannot be imported)")
    run_id = args.run_id or upkeep.new_run_id()
    app = _celery(settings)

    reports: list[contract.Report]
    if app.conf.task_always_eager or args.in_process:
        from geode.cli.progress import show_progress, spinner

        reports = []
        with spinner(show_progress(args), "upkeep") as say:  # on a terminal only (geode.cli.progress)
            for i, n in enumerate(names):
                say(f"upkeep: {n} examining the store ({i} of {len(names)} agents done)")
                reports.append(upkeep.run_agent(settings, engine, run_id, n, "manual"))
    else:
        sent = _send_run(settings, app, run_id, names)
        if sent is not None:  # the broker did not take the run: one line (or one JSON object), exit 1
            if args.json:
                print_json({"run_id": run_id, "runs": [], "error": sent["error"], "broker": sent["broker"]})
            print(f"geode: {sent['error']}", file=sys.stderr)
            return EXIT_FAILED
        waited = _wait_for(engine, run_id, names, args.wait)
        reports = [
            r
            if r is not None and r.status in contract.FINAL_STATUSES
            else contract.Report(
                agent=names[i],
                status=contract.FAILED,
                run_id=run_id,
                message=f"no worker finished it within {args.wait:.0f} s (is `geode worker` running?)",
            )
            for i, r in enumerate(waited)
        ]
    runs = [dict(r.as_dict()) for r in reports]
    not_installed = [m for m in missing if not args.agent]
    # whenever `geode doctor` would fail on this store, upkeep fails too, and says why (doctor's
    # own checks, the agents judged by this run's reports; the model is not loaded)
    from geode.services.doctor import doctor_checks

    failing = [
        c for c in doctor_checks(settings, skip_model=True, reports={r.agent: r for r in reports}) if not c["ok"]
    ]
    # what the exit says: whether every agent could do its job. A recall index (or vectors)
    # still being built is the state of another part: said as pending, never a failed night
    agents_failing = [c for c in failing if agent_job_check(c["name"])]
    pending = [c for c in failing if not agent_job_check(c["name"])]
    if args.json:
        print_json(
            {
                "run_id": run_id,
                "runs": runs,
                "not_installed": not_installed,
                "doctor": {"ok": not failing, "failed": failing},
                "agents_ok": not agents_failing and not any(r.status == contract.FAILED for r in reports),
                "pending": [c["name"] for c in pending],
            }
        )
    else:
        print(f"upkeep run {run_id}")
        for run in runs:
            print(render_report(run))
        if not_installed:
            print(f"(not installed, their module cannot be imported: {', '.join(not_installed)})")
        if agents_failing:
            print(f"geode doctor would fail on this store ({len(agents_failing)} check(s)):")
            for c in agents_failing:
                print(f"   FAIL  {c['name']}: {c['message']}")
        for c in pending:
            what = "index pending" if c["name"] in ("recall", "vectors", "index") else "not ready"
            print(f"   {what}  {c['name']}: {c['message']} (the agents' work does not wait on it)")
    failed = any(r.status == contract.FAILED for r in reports) or bool(agents_failing)
    return EXIT_FAILED if failed else EXIT_OK


#: seconds one broker socket may wait (to connect, or for an answer) while ``geode upkeep``
#: sends a run; without it a port that accepts and never answers holds the command forever
SEND_SOCKET_TIMEOUT_S = 5.0


def _send_run(settings, app, run_id: str, names: list[str]) -> dict | None:
    """Send the run to the broker; None when it was taken, else ``{"error", "broker"}``.

    Why here: a broker that refuses or never answers raised a kombu traceback (or hung) and
    printed no JSON. The sockets of this sending process get a timeout (the worker's own
    connection, which blocks on purpose while it waits for tasks, is left alone), and the
    errors kombu and the Redis client raise for a broker that cannot be reached are said in one
    line naming the broker, its password hidden."""
    from kombu.exceptions import KombuError, OperationalError
    from kombu.utils.url import maybe_sanitize_url

    from geode.agents.celery_app import enqueue_upkeep, publish_retry_policy

    opts = dict(app.conf.broker_transport_options or {})
    opts.setdefault("socket_timeout", SEND_SOCKET_TIMEOUT_S)
    opts.setdefault("socket_connect_timeout", SEND_SOCKET_TIMEOUT_S)
    app.conf.broker_transport_options = opts
    app.conf.broker_connection_timeout = SEND_SOCKET_TIMEOUT_S
    # A person waits at the terminal: the first send retries for a few seconds, not the night's
    # [upkeep] send_retry_s (the worker's sends of the next agents keep that, to ride out a restart).
    app.conf.task_publish_retry_policy = publish_retry_policy(min(settings.upkeep.send_retry_s, SEND_SOCKET_TIMEOUT_S))
    broker = maybe_sanitize_url(str(app.conf.broker_url))
    try:
        enqueue_upkeep(settings, run_id, names, trigger="manual")
    except (OperationalError, KombuError, OSError, TimeoutError) as exc:
        why = " ".join(str(exc).split())[:300] or type(exc).__name__
        return {"error": f"the broker {broker} did not take the upkeep run ({why}); is it running?", "broker": broker}
    return None


#: doctor's checks that say whether an agent could do its job on the store (the rest, the
#: recall index, the vectors, the hooks, the broker, are other parts' state)
AGENT_JOB_CHECKS = ("store", "ledger", "agents")


def agent_job_check(name: str) -> bool:
    """Whether doctor's check ``name`` is about an agent doing its job (``geode upkeep``'s exit)."""
    return name in AGENT_JOB_CHECKS or name.startswith("agent:")


# -- worker and scheduler --------------------------------------------------------------------
def _celery(settings, keep_environment: bool = False):
    """The Celery app the tasks are registered on, pointed at this command's settings.

    ``GEODE_HOME``/``GEODE_STORE`` are set while the module is first imported, so that its
    import-time app reads the same home (``--home`` wins over the environment). Only the worker
    keeps them (``keep_environment``): its children inherit them. Any other caller, an in-process
    upkeep among them, gets its environment back as it was, so that nothing later in the same
    process (a test, an embedding caller) reads this command's store as its own."""
    saved = {k: os.environ.get(k) for k in ("GEODE_HOME", "GEODE_STORE")}
    os.environ["GEODE_HOME"] = settings.home
    if settings.one_off_store:
        os.environ["GEODE_STORE"] = settings.domains[settings.default_domain]
    from geode.services.invocation import CLIError

    try:
        from geode.agents.celery_app import configure

        return configure(settings)
    except ValueError as exc:  # CeleryConfigError: limits that would hand a running task to a second worker
        raise CLIError(str(exc)) from exc
    finally:
        if not keep_environment:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def cmd_worker(args) -> int:
    settings = settings_of(args)
    app = _celery(settings, keep_environment=True)
    from geode.services.invocation import CLIError

    if app.conf.task_always_eager:
        raise CLIError(
            "no broker configured ([upkeep] broker_url or GEODE_BROKER_URL): with the embedded "
            "default, `geode upkeep` runs the agents in-process and no worker is needed"
        )
    _engine(settings)
    argv = [
        "worker",
        f"--loglevel={args.loglevel}",
        f"--concurrency={args.concurrency}",
        "-Q",
        app.conf.task_default_queue,
        "--prefetch-multiplier=1",
    ]
    app.worker_main(argv)
    return EXIT_OK


def cmd_scheduler(args) -> int:
    settings = settings_of(args)
    _celery(settings)  # the nightly job enqueues through it
    from geode.scheduler import nightly

    try:
        cfg = nightly.schedule_config(settings)
    except nightly.ScheduleError as exc:
        print(f"geode: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        lock = nightly.Lock(nightly.lock_path(settings)).acquire()
    except nightly.SchedulerLocked as exc:
        print(f"geode: scheduler lock error: {exc}", file=sys.stderr)
        return nightly.EXIT_LOCKED
    try:
        problems: list[str] = []
        sched = nightly.build_scheduler_keeping_missed(settings, problems=problems)
        job = None
        print(
            f"geode scheduler: nightly upkeep at {cfg['at']} local time "
            f"(misfire grace {cfg['misfire_grace_time'] // 3600} h, coalesced); pid {os.getpid()}",
            flush=True,
        )
        for p in problems:  # logged on stderr too; here in the scheduler's own report of how it started
            print(f"geode scheduler: WARNING: {p}", flush=True)

        def announce(event=None):
            nonlocal job
            job = sched.get_job(nightly.JOB_ID)
            if job is not None:
                print(f"geode scheduler: next run {job.next_run_time}", flush=True)

        from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED

        def on_event(event):
            if event.code == EVENT_JOB_ERROR:
                print(f"geode scheduler: upkeep enqueue failed: {event.exception}", file=sys.stderr, flush=True)
            elif event.code == EVENT_JOB_MISSED:
                print(
                    f"geode scheduler: MISSED the run due {event.scheduled_run_time} (beyond the grace)",
                    file=sys.stderr,
                    flush=True,
                )
            if event.code == EVENT_JOB_EXECUTED:
                print(
                    f"geode scheduler: fired for {event.scheduled_run_time}: {event.retval or 'already enqueued'}",
                    flush=True,
                )
            announce()

        sched.add_listener(on_event, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)
        from apscheduler.events import EVENT_SCHEDULER_STARTED

        sched.add_listener(announce, EVENT_SCHEDULER_STARTED)
        import signal

        def stop(_sig, _frm):
            sched.shutdown(wait=False)

        signal.signal(signal.SIGTERM, stop)
        try:
            sched.start()
        except (KeyboardInterrupt, SystemExit):
            pass
    finally:
        lock.release()
    return EXIT_OK


# -- doctor -------------------------------------------------------------------------------------
def cmd_doctor(args) -> int:
    import time

    from geode.services.doctor import doctor_checks
    from geode.services.doctor_reach import remember_run

    settings = settings_of(args)
    started = time.time()
    checks = doctor_checks(
        settings, skip_model=args.skip_model, project=args.project, home_dir=getattr(args, "home_dir", None)
    )
    remember_run(settings.home, started)
    ok = bool(checks) and all(c["ok"] for c in checks)
    if args.json:
        print_json({"ok": ok, "checks": checks})
    else:
        for c in checks:
            print(f"{'ok  ' if c['ok'] else 'FAIL'}  {c['name']:<18} {c['message']}")
        print(
            "all parts can do their job on this store" if ok else f"{sum(not c['ok'] for c in checks)} check(s) failed"
        )
    return EXIT_OK if ok else EXIT_FAILED
