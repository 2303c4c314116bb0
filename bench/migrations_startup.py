"""Start-up cost of the records schema check: 0.1.0's ``create_all`` against ``upgrade_to_head``.

    PYTHONPATH=. .venv/bin/python bench/migrations_startup.py [--runs 200] [--pg URL]

Each round makes a new engine (as a new process does) on a database already at head and times:
``create_all`` of the nine record tables inside one transaction (what every start-up ran
before: a has-table query per table, in ``BEGIN IMMEDIATE`` on SQLite) and ``upgrade_to_head``
(one read of ``alembic_version``, outside any transaction). Reported as medians and their ratio;
the absolute figures depend on the machine, the ratio much less. ``--pg`` adds a PostgreSQL
database (it must exist and be empty or at head).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from geode.kernel.config import Settings
from geode.records import migrations, models


def record_tables():
    from sqlmodel import SQLModel

    from geode.agents import contract
    from geode.queue import proposals  # noqa: F401  (registers the queue's tables)
    from geode.scheduler import nightly

    contract.tables()
    nightly.night_table()
    names = [
        "ledger_event",
        "control_plan",
        "proposal",
        "proposal_change",
        "proposal_action",
        "proposal_journal",
        "upkeep_run",
        "finding",
        "upkeep_night",
    ]
    return SQLModel.metadata, [SQLModel.metadata.tables[n] for n in names]


def measure(settings, runs: int) -> dict:
    md, tables = record_tables()
    engine = models.engine_for(settings)
    migrations.upgrade_to_head(engine)
    engine.dispose()
    old, new = [], []
    for _ in range(runs):
        for arm, out in (("create_all", old), ("upgrade_to_head", new)):
            engine = models.engine_for(settings)
            with engine.connect():  # connect first: both arms are timed on a pooled connection
                pass
            t0 = time.perf_counter()
            if arm == "create_all":
                with engine.begin() as conn:
                    md.create_all(conn, tables=tables)
            else:
                assert migrations.upgrade_to_head(engine) == "current"
            out.append(time.perf_counter() - t0)
            engine.dispose()
    a, b = statistics.median(old), statistics.median(new)
    return {"create_all_ms": round(a * 1000, 3), "upgrade_to_head_ms": round(b * 1000, 3), "ratio": round(a / b, 1)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--pg", metavar="URL")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as home:
        s = Settings(home=home, domains={"main": home}, default_domain="main")
        print("sqlite    ", measure(s, args.runs))
    if args.pg:
        with tempfile.TemporaryDirectory() as home:
            s = Settings(home=home, domains={"main": home}, default_domain="main", database_url=args.pg)
            print("postgresql", measure(s, args.runs))


if __name__ == "__main__":
    main()
