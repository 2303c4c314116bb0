"""The nightly upkeep: APScheduler 3.x triggers that enqueue the agents' Celery tasks.

Why each setting (a night fires once, and survives a restart):

- One scheduler process per store: a lock file (``GEODE_HOME/scheduler.lock``, ``flock``) is
  taken before the scheduler starts; a second process exits with ``SchedulerLocked``.
  Behind the lock, every night is also a row of ``upkeep_night`` (unique run id): a night is
  enqueued once even if two schedulers were ever to fire it.
- A persistent SQLAlchemy job store (the records database): the next fire time survives a
  restart, so a night missed while the machine was down is noticed when it comes back.
- ``coalesce=True``: however many nights were missed, one catch-up run.
  ``misfire_grace_time`` in hours (24 by default; APScheduler's own default of 1 s silently
  drops a night whose fire was late by a second), ``max_instances=1``.
- The run id is the night the fire was due (``night-YYYY-MM-DD`` of the latest due time at or
  before now), so a catch-up and the next regular night never share one.
"""

from __future__ import annotations

import datetime as dt
import os
import time

from geode.kernel.config import ConfigError
from geode.kernel.errors import GeodeError
from geode.kernel.locks import FileLock

JOB_ID = "geode-nightly-upkeep"
EXIT_LOCKED = 3


class SchedulerLocked(GeodeError, RuntimeError):
    """Another scheduler process holds this store's lock."""

    exit_code = EXIT_LOCKED


class ScheduleError(ConfigError, ValueError):
    """``[upkeep] at`` or ``misfire_grace_hours`` cannot be used; the message says which."""


# -- configuration ---------------------------------------------------------------------------
def schedule_config(settings) -> dict:
    """When the night runs: ``settings.upkeep`` (``GEODE_UPKEEP_AT``, then ``[upkeep] at``, then 03:00)."""
    up = settings.upkeep
    at = up.at
    parts = at.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        hour, minute = int(parts[0]), int(parts[1])
        second = int(parts[2]) if len(parts) == 3 else 0
        if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60):
            raise ValueError
    except ValueError:
        raise ScheduleError(f'[upkeep] at = {at!r}: expected "HH:MM" (local time), e.g. "03:00"') from None
    grace_h = up.misfire_grace_hours
    if grace_h < 1:
        raise ScheduleError(
            f"[upkeep] misfire_grace_hours = {grace_h}: a grace under an hour drops nights; use hours (24 by default)"
        )
    return {"at": at, "hour": hour, "minute": minute, "second": second, "misfire_grace_time": int(grace_h * 3600)}


def night_of(now: dt.datetime, hour: int, minute: int, second: int = 0) -> dt.datetime:
    """The latest due time at or before ``now`` (local wall time)."""
    due = now.replace(hour=hour, minute=minute, second=second, microsecond=0)
    if due > now:
        due -= dt.timedelta(days=1)
    return due


def run_id_for(due: dt.datetime, seconds: bool = False) -> str:
    return "night-" + (due.strftime("%Y-%m-%dT%H%M%S") if seconds else due.strftime("%Y-%m-%d"))


# -- the lock -----------------------------------------------------------------------------------
class Lock:
    """One scheduler per store: an exclusive ``flock`` on the lock file (``geode.kernel.locks``),
    the holder's pid in it; a second scheduler is refused at once, naming that pid."""

    def __init__(self, path: str):
        self.path = path
        self.lock = FileLock(path, record_pid=True)

    def acquire(self) -> Lock:
        if not self.lock.acquire(0):
            raise SchedulerLocked(
                f"another scheduler (pid {self.lock.holder() or '?'}) holds {self.path}; one scheduler per store"
            )
        return self

    def release(self) -> None:
        self.lock.release()


def lock_path(settings) -> str:
    return os.path.join(settings.home, "scheduler.lock")


# -- the enqueue log ---------------------------------------------------------------------------
def night_table():
    """The ``upkeep_night`` table (``geode.scheduler.tables``), imported on first use: this
    module is read by the CLI, which must not pay for SQLModel."""
    from geode.scheduler.tables import NIGHT

    return NIGHT


def _engine(settings):
    from geode.agents.celery_app import records_engine

    return records_engine(settings)  # init_db: the records migrations made upkeep_night


def fire(home: str | None = None, store: str | None = None, now: float | None = None) -> str | None:
    """The job: enqueue this night's upkeep once. Returns the run id, or None when this night
    was enqueued before (by this or any other process)."""
    from sqlalchemy.exc import IntegrityError

    from geode.agents.celery_app import enqueue_upkeep
    from geode.kernel.config import load_settings

    settings = load_settings(store=store, home=home)
    cfg = schedule_config(settings)
    moment = dt.datetime.fromtimestamp(time.time() if now is None else now)
    due = night_of(moment, cfg["hour"], cfg["minute"], cfg["second"])
    run_id = run_id_for(due, seconds=os.environ.get("GEODE_UPKEEP_RUN_ID_SECONDS") == "1")
    from sqlmodel import Session

    from geode.scheduler.tables import UpkeepNight

    engine = _engine(settings)
    night = UpkeepNight(run_id=run_id, due=due.isoformat(), enqueued_at=time.time(), pid=str(os.getpid()))
    try:
        with Session(engine) as session:
            session.add(night)
            session.commit()  # the primary key: a night enqueued before is an IntegrityError here
    except IntegrityError:
        return None
    try:
        enqueue_upkeep(settings, run_id, trigger="schedule")
    except BaseException:  # clean up, then re-raise: nothing is caught here
        with Session(engine) as session:  # not sent: the night stays open for the next attempt
            stored = session.get(UpkeepNight, run_id)
            if stored is not None:
                session.delete(stored)
                session.commit()
        raise
    return run_id


def enqueued_nights(settings) -> list[str]:
    from sqlmodel import Session, col, select

    from geode.scheduler.tables import UpkeepNight

    with Session(_engine(settings)) as session:
        return list(session.exec(select(UpkeepNight.run_id).order_by(col(UpkeepNight.run_id))).all())


# -- the scheduler ------------------------------------------------------------------------------
def build_scheduler(settings, background: bool = False):
    """A scheduler with the persistent job store and the nightly job (replacing a stored one,
    whose next fire time is kept when the schedule did not change)."""
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.schedulers.blocking import BlockingScheduler
    from apscheduler.triggers.cron import CronTrigger

    cfg = schedule_config(settings)
    engine = _engine(settings)
    defaults = {"coalesce": True, "max_instances": 1, "misfire_grace_time": cfg["misfire_grace_time"]}
    cls = BackgroundScheduler if background else BlockingScheduler
    sched = cls(
        jobstores={"default": SQLAlchemyJobStore(engine=engine, tablename="apscheduler_jobs")}, job_defaults=defaults
    )
    trigger = CronTrigger(hour=cfg["hour"], minute=cfg["minute"], second=cfg["second"])
    store = settings.domains[settings.default_domain] if settings.one_off_store else None
    sched.add_job(
        "geode.scheduler.nightly:fire",
        trigger,
        id=JOB_ID,
        name="geode nightly upkeep",
        kwargs={"home": settings.home, "store": store},
        replace_existing=True,
        **defaults,
    )
    return sched


def serve(settings, once_started=None) -> int:
    """Run the scheduler in the foreground until interrupted (``geode scheduler``)."""
    lock = Lock(lock_path(settings)).acquire()
    try:
        sched = build_scheduler_keeping_missed(settings)
        if once_started is not None:
            once_started(sched)
        try:
            sched.start()
        except (KeyboardInterrupt, SystemExit):
            pass
        return 0
    finally:
        lock.release()


def build_scheduler_keeping_missed(settings, background: bool = False, problems: list[str] | None = None):
    """``build_scheduler``, keeping the stored next fire time of the job when it is in the past
    (a night missed while the scheduler was down) so that it is caught up once, coalesced.

    When the stored job cannot be read, a missed night cannot be caught up on this start: that
    is logged as a warning and appended to ``problems`` (the command prints it), never silent."""
    import pickle

    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from sqlalchemy.exc import SQLAlchemyError

    engine = _engine(settings)
    missed = None
    try:
        js = SQLAlchemyJobStore(engine=engine, tablename="apscheduler_jobs")
        js.start(None, "default")
        job = js.lookup_job(JOB_ID)
        if job is not None and job.next_run_time is not None:
            missed = job.next_run_time
    # the table unreadable; the pickled job corrupt, written by a newer APScheduler (ValueError),
    # or naming a function that no longer imports (LookupError)
    except (SQLAlchemyError, pickle.UnpicklingError, EOFError, ValueError, LookupError) as exc:
        why = (
            f"missed-night catch-up is off for this start: the stored job {JOB_ID!r} cannot be read "
            f"({type(exc).__name__}: {exc}); a night missed while the scheduler was down is not run "
            "now (run `geode upkeep` by hand); later nights run as scheduled"
        )
        import logging

        logging.getLogger(__name__).warning("geode scheduler: %s", why)
        if problems is not None:
            problems.append(why)
    sched = build_scheduler(settings, background)
    if missed is not None:
        now = dt.datetime.now(missed.tzinfo)
        if missed <= now:
            sched.modify_job(JOB_ID, next_run_time=missed)
    return sched
