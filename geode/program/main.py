"""``geode``: the command line's, the page's and the MCP server's commands in one parser.

The order of the command modules is the order ``geode --help`` and docs/CLI.md list them in.
Each command module imports its heavy dependencies only inside its command functions, so that
building this parser stays quick for every command.
"""

from __future__ import annotations

import argparse
import sys

from geode.cli.main import register as cli_commands
from geode.mcp.command import register as mcp_command
from geode.services.commandline import build_program, run_program
from geode.web.command import register as web_command


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``geode`` command."""
    return build_program([cli_commands, web_command, mcp_command])


def main(argv: list[str] | None = None) -> int:
    """The console script ``geode`` and ``python -m geode``."""
    return run_program(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
