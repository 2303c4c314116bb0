"""The nightly upkeep: APScheduler 3.x triggers that enqueue the agents' Celery tasks.

Why each setting (a night fires once, and survives a restart):

- One scheduler process per home: a lock file (``GEODE_HOME/scheduler.lock``, ``flock``) is
  taken before the scheduler starts; a second process exits with ``SchedulerLocked``.
  Behind the lock, every night is also a row of ``upkeep_night`` (unique run id): a night is
  enqueued once even if two schedulers were ever to fire it.
- One night per store, whatever the homes: two homes with separate records on one store each
  ran their own scheduler, both fired, and the night ran twice into two queues (issue 22, point
  13). ``fire`` decides under the store's own lock (``store_lock_paths``: an ``flock`` on
  ``<store>/.geode-scheduler.lock``, or ``<store>/.git/geode-scheduler.lock`` when the store is
  a git work tree, so ``git status`` never shows it; the walk skips dot files) and writes into
  it which home sent which night. A second home that finds this night sent by another skips
  it and says so ("skipped night-...: another home ... holds this store's night"); a night no
  home sent (the other home's scheduler was down) it sends itself.
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


# -- one night per store, across homes -------------------------------------------------------
STORE_LOCK_NAME = ".geode-scheduler.lock"


def store_lock_paths(settings) -> list[str]:
    """The scheduler lock of each store folder the home's nights run over (sorted, so two homes
    take them in one order): inside the folder, where every home that shares it finds it."""
    out = []
    for root in sorted({os.path.realpath(r) for _d, r in settings.domain_roots()}):
        git = os.path.join(root, ".git")
        out.append(
            os.path.join(git, "geode-scheduler.lock") if os.path.isdir(git) else os.path.join(root, STORE_LOCK_NAME)
        )
    return out


def _read_claim(fd: int) -> dict:
    import json

    try:
        got = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _fd(lock: FileLock) -> int:
    if lock.fd is None:
        raise RuntimeError(f"{lock.path}: not held")
    return lock.fd


class StoreNight:
    """The stores' scheduler locks, held while one home decides and sends a night; what each
    lock file says afterwards is the last night sent on that store and by which home."""

    def __init__(self, settings, run_id: str, wait_s: float):
        self.settings, self.run_id, self.wait_s = settings, run_id, wait_s
        self.home = os.path.realpath(settings.home)
        self.locks: list[FileLock] = []
        self.busy: str | None = None

    def __enter__(self) -> StoreNight:
        for path in store_lock_paths(self.settings):
            lock = FileLock(path)
            try:
                if not lock.acquire(self.wait_s):
                    self.busy = f"another home held {path} for over {self.wait_s:.0f} s: it is sending the night now"
                    self.__exit__()
                    return self
            except OSError as exc:  # a read-only store: this home's own lock still holds its nights
                import logging

                logging.getLogger(__name__).warning(
                    "geode scheduler: cannot take the store's scheduler lock %s (%s); two homes on this store "
                    "could both run %s",
                    path,
                    exc,
                    self.run_id,
                )
                continue
            self.locks.append(lock)
        return self

    def held_by_other(self) -> str | None:
        """Who sent this night on one of the stores, when that is another home (else None)."""
        if self.busy is not None:
            return self.busy
        for lock in self.locks:
            claim = _read_claim(_fd(lock))
            if claim.get("run_id") == self.run_id and claim.get("home") != self.home:
                return f"home {claim.get('home')} (pid {claim.get('pid', '?')}) sent it, as {lock.path} says"
        return None

    def mark_sent(self) -> None:
        import json

        line = json.dumps({"run_id": self.run_id, "home": self.home, "pid": os.getpid(), "at": time.time()})
        for lock in self.locks:
            os.ftruncate(_fd(lock), 0)
            os.pwrite(_fd(lock), (line + "\n").encode("utf-8"), 0)

    def __exit__(self, *exc: object) -> None:
        for lock in reversed(self.locks):
            lock.release()
        self.locks = []


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
    """The job: enqueue this night's upkeep once. Returns the run id, None when this night was
    enqueued before (by this or any other process of this home), or ``"skipped <run id>: ..."``
    when another home sent it on this store (``StoreNight``)."""
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
    # the other home may be sending this night now (its sends retry for send_retry_s): wait for it
    with StoreNight(settings, run_id, wait_s=settings.upkeep.send_retry_s + 30) as store_night:
        other = store_night.held_by_other()
        if other is not None:
            import logging

            said = f"skipped {run_id}: another home holds this store's night ({other})"
            logging.getLogger(__name__).warning("geode scheduler: %s", said)
            return said
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
        store_night.mark_sent()
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
