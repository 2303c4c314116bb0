"""Maintainers' commands for the records migrations (users never need them: geode upgrades
the database itself at start-up).

    python -m geode.records.migrations revision -m "finding rule column"
        write versions/NNNN_finding_rule_column.py after the current head
    python -m geode.records.migrations sql [--dialect postgresql|sqlite] [--from REV]
        print the SQL of the upgrade to head (for review, or for a DBA to run)
    python -m geode.records.migrations history
"""

from __future__ import annotations

import argparse
import re
import sys

from geode.records import migrations


def main(argv: list[str] | None = None) -> int:
    from alembic import command

    p = argparse.ArgumentParser(prog="python -m geode.records.migrations")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("revision", help="write a new, empty revision after the current head")
    r.add_argument("-m", "--message", required=True)
    s = sub.add_parser("sql", help="print the SQL of the upgrade to head")
    s.add_argument("--dialect", choices=["postgresql", "sqlite"], default="postgresql")
    s.add_argument("--from", dest="start", metavar="REV", help="start after this revision (default: an empty database)")
    sub.add_parser("history", help="list the revisions")
    args = p.parse_args(argv)

    if args.cmd == "revision":
        script = migrations.script_directory()
        head = script.get_current_head()
        number = int(head.split("_", 1)[0]) + 1 if head else 1
        slug = re.sub(r"[^a-z0-9]+", "_", args.message.lower()).strip("_")
        rev_id = f"{number:04d}_{slug}"[:32].rstrip("_")  # alembic_version.version_num is VARCHAR(32)
        cfg = migrations.alembic_config()
        cfg.set_main_option("file_template", "%%(rev)s")
        command.revision(cfg, message=args.message, rev_id=rev_id)
        print(f"now set HEAD = {rev_id!r} in geode/records/migrations/__init__.py and write upgrade()")
    elif args.cmd == "sql":
        cfg = migrations.alembic_config(dialect_name=args.dialect)
        command.upgrade(cfg, f"{args.start}:head" if args.start else "head", sql=True)
    else:
        command.history(migrations.alembic_config())
    return 0


if __name__ == "__main__":
    sys.exit(main())
