"""What every command module of the command line shares: the user-facing error, exit codes,
JSON printing, settings from the parsed arguments and the records engine.

Its own module so that ``main`` and the ``*_cmds`` modules import it and never each other.
"""

from __future__ import annotations

import json
import sys

from geode.delivery.config import ConfigError, Settings, load_settings

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


class CLIError(Exception):
    """A message for the user; exit status 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def settings_of(args) -> Settings:
    """The settings for this invocation, read once from its flags, the environment and the file."""
    try:
        settings = load_settings(store=getattr(args, "store", None), home=getattr(args, "home", None))
    except ConfigError as exc:
        raise CLIError(str(exc)) from exc
    for w in settings.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return settings


def engine_of(settings: Settings):
    from geode.delivery import models

    return models.init_db(settings)
