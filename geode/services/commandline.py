"""The one way a ``geode`` program is put together and run: the shared options (``--store``,
``--home``, ``--json``), the top parser over the command modules' ``register(sub, common)``, and
the entry that parses, runs one command and says any failure in one line.

Why below the surfaces: the whole ``geode`` program (``geode.program``), the command line's
own script for an agent's shell (``geode/cli/command.py``) and the MCP server's script
(``geode/mcp/main.py``) each compose their own set of command modules, and must parse and fail
the same way without importing one another.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable

from geode.kernel.errors import GeodeError
from geode.services.invocation import machine_failure, records_location

#: ``register(sub, common)`` of a command module: adds its subcommands to ``sub``, each with
#: ``common`` (the shared options) among its parents.
Registrar = Callable[[argparse._SubParsersAction, argparse.ArgumentParser], None]

#: The status of a command whose reader went away (``geode run | head``): 128 + SIGPIPE, what
#: the shell reports for a Unix tool ended by that signal.
EXIT_BROKEN_PIPE = 141

#: The options every command shares, which may also come before the command's name.
_SHARED_WITH_VALUE = ("--store", "--home")
_SHARED_FLAGS = ("--json",)


def shared_options() -> argparse.ArgumentParser:
    """The parent parser of every command: ``--store DIR``, ``--home DIR``, ``--json``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", metavar="DIR", help="a one-off store folder (instead of the configured domains)")
    common.add_argument("--home", metavar="DIR", help="GEODE_HOME for this command (default: $GEODE_HOME or ~/.geode)")
    common.add_argument("--json", action="store_true", help="print the documented JSON shape")
    return common


def build_program(registrars: Iterable[Registrar]) -> argparse.ArgumentParser:
    """The ``geode`` parser over these command modules, in this order (the order ``--help`` and
    docs/CLI.md list the commands in)."""
    common = shared_options()
    p = argparse.ArgumentParser(
        prog="geode",
        description="Crystal memory for coding agents. The shared options --store DIR, --home DIR and "
        "--json may be given before COMMAND as well as after it.",
    )
    p.add_argument("--version", action="version", version=f"geode {_version()}")
    sub = p.add_subparsers(dest="command_name", metavar="COMMAND")
    sub.required = True
    for register in registrars:
        register(sub, common)
    return p


def _version() -> str:
    """The installed distribution's version (what a bug report should name), or the tree's."""
    from importlib import metadata

    try:
        return metadata.version("geode")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def run_program(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse, run one command, say any ``GeodeError`` in one line. A closed pipe on stdout
    (``| head``) ends the command quietly, as Unix tools end, instead of in a traceback."""
    try:
        rc = _dispatch(parser, argv)
        sys.stdout.flush()  # a pipe closed early fails here, inside the handler, not at exit
        return rc
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _dispatch(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    args = parser.parse_args(store_first(argv if argv is not None else sys.argv[1:]))
    try:
        return int(args.func(args) or 0)
    except GeodeError as exc:  # every failure said for a person: one line and its status; a bug keeps its traceback
        print(f"geode: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the machine's failures (a corrupt or read-only database...) in one line
        said = machine_failure(exc, records_location(args))
        if said is None:
            raise
        print(f"geode: {said}", file=sys.stderr)
        return said.exit_code


def store_first(argv: list[str]) -> list[str]:
    """``geode --store DIR search x`` as ``geode search x --store DIR``: the shared options given
    before the command's name move to the end, where the command's own parser (nested ones such
    as ``proposals list`` included) reads them."""
    lead: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _SHARED_WITH_VALUE and i + 1 < len(argv):
            lead += argv[i : i + 2]
            i += 2
        elif a.startswith(tuple(o + "=" for o in _SHARED_WITH_VALUE)) or a in _SHARED_FLAGS:
            lead.append(a)
            i += 1
        else:
            break
    if not lead or i >= len(argv) or "--" in argv[i:]:
        return list(argv)
    return [*argv[i:], *lead]


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush at exit has nowhere to fail
    (the Python documentation's recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (a test's StringIO)
        pass
