"""The command line: thin adapters (argparse) over the rooms' and the services' APIs. ``main``
runs the command line's commands alone; the console script ``geode`` is the whole program
(``geode.program.main``), which adds the page's and the MCP server's commands."""

from geode.cli.main import main

__all__ = ["main"]
