"""The Celery app: one thin task per agent, taking ids, idempotent by run id.

Start a worker with ``geode worker`` (or ``celery -A geode.agents.celery_app worker``); the broker
comes from ``GEODE_BROKER_URL`` or ``[upkeep] broker_url`` in ``geode.toml`` (``settings.upkeep``,
resolved by ``geode.kernel.config.load_settings``; the module's ``app`` is configured from the
environment when it is imported, and ``configure(settings)`` sets it for an entry point's settings). With no broker
configured the tasks run in-process (``task_always_eager``): the embedded default needs no
server.

Why these settings (a task is never lost, never run twice, never left hanging):

- ``task_acks_late`` with ``task_reject_on_worker_lost``: a task whose worker dies is
  redelivered, not lost. ``acks_late`` alone acknowledges a task whose child was killed.
- hard ``task_time_limit`` below the broker's ``visibility_timeout`` (set explicitly, 2 h by
  default): a task still running when the timeout passes would be handed to a second worker.
  The limits are checked when the app is configured (``CeleryConfigError``), and no task is
  ever sent with a countdown or an ETA.
- ``worker_prefetch_multiplier = 1``: a worker holds one upkeep task at a time; the others
  stay in the queue for other workers.
- ``task_publish_retry_policy`` from ``[upkeep] send_retry_s`` (60 s by default): every send,
  the worker's send of a night's next agent included, keeps retrying with backoff for that long.
  Celery's default (3 retries, 0.6 s) dropped the rest of a night when Redis restarted under
  it (issue 22, point 7). A night's expected agents are recorded before it is sent and an
  agent whose task fails or whose successor cannot be sent leaves the rest marked as never run
  (``geode.agents.nights``), so a night that did not finish says so.
- Idempotent by run id (``geode.agents.upkeep.run_agent``); a task that kills its worker is run at
  most ``MAX_ATTEMPTS`` times and then marked failed, never redelivered forever.
"""

from __future__ import annotations

import os

from celery import Celery, chain, signals

from geode.agents import roster
from geode.agents.recording import MAX_ATTEMPTS
from geode.kernel.config import ConfigError

#: the hard limit when none is set: at most this, and at most half the visibility timeout
DEFAULT_TIME_LIMIT = 1800
AGENT_TASKS = roster.NAMES  # one task each; plugins share ``geode.upkeep.agent``


class CeleryConfigError(ConfigError, ValueError):
    """The ``[upkeep]`` broker settings cannot be used; the message says which and why."""


def broker_settings(settings) -> dict:
    """The broker and limits of ``settings.upkeep`` (environment, then ``[upkeep]``), validated."""
    up = settings.upkeep
    vt = up.visibility_timeout
    hard = up.time_limit if up.time_limit is not None else min(DEFAULT_TIME_LIMIT, vt // 2)
    soft = up.soft_time_limit if up.soft_time_limit is not None else max(1, hard - max(1, hard // 20))
    if not 0 < soft <= hard < vt:
        raise CeleryConfigError(
            f"[upkeep] limits must satisfy 0 < soft_time_limit ({soft}) <= time_limit ({hard}) "
            f"< visibility_timeout ({vt}): a task still running at the visibility timeout is given to a second worker"
        )
    if not up.send_retry_s >= 0:
        raise CeleryConfigError(
            f"[upkeep] send_retry_s = {up.send_retry_s}: seconds a task send keeps retrying, 0 or more"
        )
    return {
        "broker_url": up.broker_url or None,
        "send_retry_s": float(up.send_retry_s),
        "visibility_timeout": vt,
        "time_limit": hard,
        "soft_time_limit": soft,
        "queue": up.queue,
    }


#: the backoff of a send while the broker is away: 0, 0.5, 1, 1.5, 2, 2, ... seconds
RETRY_STEP_S, RETRY_MAX_S = 0.5, 2.0


def publish_retry_policy(seconds: float) -> dict:
    """A kombu retry policy whose waits add up to at least ``seconds`` (at least one retry), so
    a send rides out a broker restart of that length instead of Celery's 0.6 s."""
    waited, retries = 0.0, 0
    while waited < seconds or retries == 0:
        waited += min(retries * RETRY_STEP_S, RETRY_MAX_S)
        retries += 1
    return {"max_retries": retries, "interval_start": 0, "interval_step": RETRY_STEP_S, "interval_max": RETRY_MAX_S}


def _conf(settings) -> dict:
    cfg = broker_settings(settings)
    conf = dict(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        task_time_limit=cfg["time_limit"],
        task_soft_time_limit=cfg["soft_time_limit"],
        task_default_queue=cfg["queue"],
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        task_publish_retry=True,
        task_publish_retry_policy=publish_retry_policy(cfg["send_retry_s"]),
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        broker_transport_options={"visibility_timeout": cfg["visibility_timeout"]},
    )
    if cfg["broker_url"]:
        conf["broker_url"] = cfg["broker_url"]
        conf["task_always_eager"] = False
        conf["task_eager_propagates"] = False
    else:
        conf["broker_url"] = "memory://"
        conf["task_always_eager"] = True
        conf["task_eager_propagates"] = True
    conf["geode"] = cfg
    return conf


def make_app(home: str | None = None, env: dict | None = None, settings=None) -> Celery:
    """A Celery app for ``settings`` (or the settings of ``home`` and ``env``, read here)."""
    if settings is None:
        from geode.kernel.config import load_settings

        settings = load_settings(home=home, env=env)
    app = Celery("geode")
    app.conf.update(_conf(settings))
    return app


def configure(settings, celery_app: Celery | None = None) -> Celery:
    """Point the app the tasks are registered on at ``settings`` (an entry point's flags win over
    the environment the module was imported with). Call it before the app first connects."""
    capp = celery_app or app
    capp.conf.update(_conf(settings))
    return capp


app = make_app()

_ENGINES: dict[tuple[int, str], object] = {}


def records_engine(settings):
    """One records engine per process and database (never shared across a fork)."""
    from geode.agents.contract import ensure_tables
    from geode.records.models import init_db

    key = (os.getpid(), settings.db_url)
    if key not in _ENGINES:
        engine = init_db(settings)
        ensure_tables(engine)
        _ENGINES[key] = engine
    return _ENGINES[key]


def run_task(
    run_id: str, agent: str, home: str | None = None, store: str | None = None, trigger: str = "celery"
) -> dict:
    """The body every task shares: settings from ids, one agent, the stored report's summary."""
    from geode.agents.upkeep import run_agent
    from geode.kernel.config import load_settings

    settings = load_settings(store=store, home=home)
    engine = records_engine(settings)
    report = run_agent(settings, engine, run_id, agent, trigger, MAX_ATTEMPTS)
    return {
        "run_id": run_id,
        "agent": agent,
        "status": report.status,
        "attempts": report.attempts,
        "findings": len(report.findings),
        "proposals": len(report.proposals),
    }


def _make_task(agent: str):
    def task(self, run_id: str, home: str | None = None, store: str | None = None, trigger: str = "celery"):
        return run_task(run_id, agent, home, store, trigger)

    task.__name__ = f"{agent}_task"
    return app.task(name=f"geode.upkeep.{agent}", bind=True, acks_late=True, reject_on_worker_lost=True)(task)


#: one thin task per agent: ``geode.upkeep.librarian`` ... ``geode.upkeep.corrector``
TASKS = {name: _make_task(name) for name in AGENT_TASKS}


@app.task(name="geode.upkeep.agent", bind=True, acks_late=True, reject_on_worker_lost=True)
def agent_task(
    self, run_id: str, agent: str, home: str | None = None, store: str | None = None, trigger: str = "celery"
):
    """Agents added by ``[upkeep] agents`` (plugins) run through this one."""
    return run_task(run_id, agent, home, store, trigger)


@app.task(name="geode.recall.embed_pending", bind=True, acks_late=True, reject_on_worker_lost=True)
def embed_pending_task(self, home: str | None = None, store: str | None = None, limit: int | None = 512):
    """Embed up to ``limit`` pending notes of ``home`` on this worker, as the one Chroma writer
    (``geode.recall.vectors.embed_pending``; another writer holding the lock: nothing to do, it
    embeds them). While notes remain, it sends the next task (no countdown, no ETA), so one task
    stays inside the time limit. Sent by a search that finds notes without a vector
    (``geode.recall.embed_jobs``)."""
    from geode.kernel.config import load_settings
    from geode.recall.vectors import embed_pending

    settings = load_settings(store=store, home=home)
    r = embed_pending(settings, limit=limit, wait_s=0.0)
    more = bool(limit) and not r.get("locked") and r.get("embedded", 0) >= int(limit or 0)
    if more and not self.app.conf.task_always_eager:
        self.apply_async(args=(home, store, limit), queue=self.app.conf.task_default_queue)
    return {"embedded": r.get("embedded", 0), "locked": bool(r.get("locked")), "more": more}


def signature_for(
    agent: str, run_id: str, home: str | None, store: str | None, trigger: str, celery_app: Celery | None = None
):
    capp = celery_app or app
    queue = capp.conf.task_default_queue
    if agent in TASKS:
        return capp.signature(f"geode.upkeep.{agent}", args=(run_id, home, store, trigger), immutable=True, queue=queue)
    return capp.signature("geode.upkeep.agent", args=(run_id, agent, home, store, trigger), immutable=True, queue=queue)


def enqueue_upkeep(
    settings, run_id: str, agents: list[str] | None = None, trigger: str = "celery", celery_app: Celery | None = None
):
    """Send one upkeep run: the agents chained in their order (the Corrector last, so it sees
    the others' stored findings). Without a broker the chain runs here, now. No countdown and
    no ETA: a delayed message past the visibility timeout would be delivered twice."""
    from geode.agents.upkeep import available

    names = agents or available(settings)[0]
    home = settings.home
    store = settings.domains[settings.default_domain] if settings.one_off_store else None
    sigs = [signature_for(n, run_id, home, store, trigger, celery_app) for n in names]
    c = chain(*sigs) if len(sigs) > 1 else sigs[0]
    from geode.agents import nights

    engine = records_engine(settings)
    nights.expect(engine, run_id, names, trigger)  # what the night expects, before it is sent
    try:
        return c.apply_async()
    except BaseException:  # clean up, then re-raise: nothing is caught here
        nights.forget_expected(engine, run_id, names)  # not sent: nothing of it is queued
        raise


@signals.task_failure.connect
def _rest_never_ran(sender=None, exception=None, args=None, **_kw) -> None:
    """An upkeep task failed (its agent raised, or the next agent could not be sent within
    ``[upkeep] send_retry_s``): the chain stops here, so the agents of its night still queued
    will never run; they are marked so (``geode.agents.nights``), never left looking fine."""
    name = getattr(sender, "name", "") or ""
    if not name.startswith("geode.upkeep.") or not args:
        return
    from geode.agents import nights
    from geode.kernel.config import load_settings

    if name == "geode.upkeep.agent":
        run_id, agent, home, store = (list(args) + [None] * 4)[:4]
    else:
        run_id, home, store = (list(args) + [None] * 3)[:3]
        agent = name.rsplit(".", 1)[1]
    from kombu.exceptions import OperationalError

    if isinstance(exception, OperationalError):
        why = f"after {agent} the broker refused the next task for longer than [upkeep] send_retry_s ({exception})"
    else:
        why = f"the {agent} task failed ({type(exception).__name__}: {exception}), so the rest of the night was not run"
    settings = load_settings(store=store, home=home)
    missed = nights.mark_never_ran(records_engine(settings), run_id, why)
    if missed:
        import logging

        logging.getLogger(__name__).error(
            "upkeep %s: %s never ran: the %s task failed: %s", run_id, ", ".join(missed), agent, exception
        )


def ping(celery_app: Celery | None = None, timeout: float = 2.0) -> tuple[bool, str]:
    """Whether the configured broker answers (the doctor asks)."""
    capp = celery_app or app
    if capp.conf.task_always_eager:
        return True, "no broker configured: tasks run in-process"
    from kombu.exceptions import OperationalError

    try:
        with capp.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
        return True, f"broker {conn.as_uri()} answers"
    # kombu wraps a refused or timed-out connection in OperationalError; an unknown transport in
    # the URL is a KeyError/ImportError/ValueError from kombu's URL parsing
    except (OperationalError, OSError, KeyError, ImportError, ValueError) as exc:
        return False, f"broker {capp.conf.broker_url} does not answer: {exc}"


def workers(celery_app: Celery | None = None, timeout: float = 1.0) -> tuple[bool, str]:
    """Whether a live worker consumes the configured queue (the doctor asks, after ``ping``).

    Why: a broker that answers is not a queue that is served. With no worker alive every
    queued upkeep run waits forever, and doctor used to say "all parts can do their job" (issue
    15, point 6). The workers are asked through Celery's remote control (``active_queues``,
    a broadcast that each live worker answers within ``timeout``); a worker that consumes other
    queues only cannot run these tasks, so it does not count."""
    capp = celery_app or app
    if capp.conf.task_always_eager:
        return True, "no broker configured: tasks run in-process"
    from kombu.exceptions import OperationalError

    queue = capp.conf.task_default_queue
    try:
        replies = capp.control.inspect(timeout=timeout).active_queues() or {}
    except (OperationalError, OSError, KeyError, ImportError, ValueError) as exc:
        return False, f"cannot ask the workers through {capp.conf.broker_url}: {exc}"
    live = sorted(w for w, queues in replies.items() if any(q.get("name") == queue for q in queues or []))
    if live:
        return True, f"{len(live)} worker(s) consume queue {queue!r}: {', '.join(live)}"
    return False, (
        f"no worker consumes queue {queue!r} (none answered within {timeout:g} s): queued upkeep runs "
        "would wait forever; start one with `geode worker`"
    )
