"""What every command module shares, whichever surface registers it (the command line, the
page's ``geode web``, the MCP server's ``geode mcp``): the user-facing error, exit codes, JSON
printing, settings from the parsed arguments, the records engine, and the machine's failures
said in one line.

Below the surfaces so that ``geode.web`` and ``geode.mcp`` read their flags the way the command
line does without importing ``geode.cli`` (no surface imports another).
"""

from __future__ import annotations

import errno
import json
import os
import sys

from geode.kernel.config import ConfigError, Settings, load_settings
from geode.kernel.errors import GeodeError, RecordsError

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


class CLIError(GeodeError):
    """A message for the user; exit status 1 (or ``code``). ``main`` prints every ``GeodeError``
    the same way; this one stays for the commands that raise it by name."""

    def __init__(self, message: str, code: int = 1, *, hint: str = ""):
        super().__init__(message, hint=hint, exit_code=code)

    @property
    def code(self) -> int:
        return self.exit_code


def print_json(obj, compact: bool = False) -> None:
    """``obj`` as JSON on stdout: indented, or on one line with ``compact`` (a stream of objects)."""
    if compact:
        print(json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":")))
    else:
        print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def settings_of(args, *, store_must_exist: bool = True, creates_home: bool = False) -> Settings:
    """The settings for this invocation, read once from its flags, the environment and the file.

    A one-off store (``--store`` or ``GEODE_STORE``) that is not a folder is an error naming the
    path: otherwise a typo reads as "nothing matched" and exits 0. So is a home whose store does
    not exist (a mistyped ``--home`` or ``GEODE_HOME`` once read as a new empty home, "0 notes,
    in sync", exit 0). ``store_must_exist=False`` for the command whose job is to create them
    (``init``); ``creates_home`` for one that creates a home's default store but not a one-off
    store (``run``)."""
    try:
        settings = load_settings(store=getattr(args, "store", None), home=getattr(args, "home", None))
    except ConfigError as exc:
        raise CLIError(str(exc)) from exc
    if store_must_exist and not creates_home and not settings.one_off_store:
        root = settings.domains[settings.default_domain]
        if not os.path.isdir(root):
            given = getattr(args, "home", None)
            source = (
                f"--home {given}"
                if given
                else f"GEODE_HOME={os.environ['GEODE_HOME']}"
                if os.environ.get("GEODE_HOME")
                else "the default home"
            )
            if not os.path.exists(settings.home):
                what = "does not exist"
            elif not os.path.exists(os.path.join(settings.home, "geode.toml")):
                what = f"holds no geode.toml and no store ({root})"
            else:
                what = f"names the store {root}, which does not exist"
            raise CLIError(
                f"the geode home {settings.home} ({source}) {what}",
                hint="check the path, or create a home there with `geode init` (or name a store with --store DIR)",
            )
    if store_must_exist and settings.one_off_store:
        given = getattr(args, "store", None)
        root = settings.domains[settings.default_domain]
        if not os.path.isdir(root):
            source = f"--store {given}" if given else f"GEODE_STORE={os.environ.get('GEODE_STORE', '')}"
            what = "is not a folder" if os.path.exists(root) else "does not exist"
            raise CLIError(
                f"the store {root} ({source}) {what}",
                hint="check the path, or create a store there with `geode init DIR`",
            )
    for w in settings.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return settings


def engine_of(settings: Settings):
    """The records engine, tables created and the spool drained; ``RecordsError`` (a message, not
    a traceback) when the database cannot be opened or written."""
    from sqlalchemy.exc import SQLAlchemyError

    from geode.records import models

    try:
        return models.init_db(settings)
    except SQLAlchemyError as exc:
        where = settings.db_url.split("@")[-1]
        raise RecordsError(
            f"the records database {where} cannot be used ({getattr(exc, 'orig', None) or exc})",
            hint="check [database] url in geode.toml (or GEODE_DATABASE_URL), that the database "
            "runs and that this user may write there",
        ) from exc


#: the database drivers a records URL may name (``postgresql+pg8000://``...): one that is not
#: installed is the machine's failure, said in a sentence, not a bug of geode's
_DRIVERS = frozenset({"psycopg", "psycopg2", "psycopg2cffi", "pg8000", "asyncpg", "pysqlite2", "pymysql", "MySQLdb"})
_MACHINE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})


def records_location(args) -> str | None:
    """Where this invocation's records database is, for a message: the SQLite file, or the URL
    with its password hidden; None when the settings themselves cannot be read."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        settings = load_settings(store=getattr(args, "store", None), home=getattr(args, "home", None))
        url = make_url(settings.db_url)
    except (GeodeError, ArgumentError, ValueError):
        return None
    if url.get_backend_name() == "sqlite":
        return url.database or ":memory:"
    return url.render_as_string(hide_password=True)


def machine_failure(exc: BaseException, records: str | None = None) -> GeodeError | None:
    """The failures of the machine a command runs on rather than of geode, as a message: a
    database driver that is not installed, a records database that cannot be opened (corrupt,
    read-only, unreachable), a file or folder this user may not write (a read-only GEODE_HOME).
    None for anything else: a bug keeps its traceback."""
    from sqlalchemy.exc import DatabaseError, NoSuchModuleError, OperationalError

    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in _DRIVERS:
        return RecordsError(
            f"the database driver {exc.name!r} named by the records URL is not installed",
            hint="install it into geode's environment, or change [database] url (GEODE_DATABASE_URL)",
        )
    if isinstance(exc, NoSuchModuleError):
        return RecordsError(f"the records URL names a database SQLAlchemy does not know ({exc})")
    if isinstance(exc, OperationalError) or type(exc) is DatabaseError:  # not ProgrammingError: a bug
        where = f" {records}" if records else ""  # which file: a person has several homes
        return RecordsError(
            f"the records database{where} cannot be used ({getattr(exc, 'orig', None) or exc})",
            hint="check that the database file is geode's and not damaged, that it runs and that this user may write there",
        )
    if isinstance(exc, OSError) and exc.errno in _MACHINE_ERRNOS:
        where = exc.filename if exc.filename is not None else "a file"
        return GeodeError(f"{where}: {exc.strerror or exc}")
    return None
