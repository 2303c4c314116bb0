"""The command line: thin, over the rooms' APIs. ``main`` is the console script."""

from geode.cli.main import main

__all__ = ["main"]
