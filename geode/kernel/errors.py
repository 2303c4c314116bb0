"""geode's exceptions: one base, a few categories, each carrying the exit status a command ends
with and a message written for a person (what went wrong, where, and what to do about it).

Every exception class under ``geode/`` derives from ``GeodeError`` (tests/test_errors.py walks
the package to hold us to it), so the command line catches one type, prints ``geode: <message>``
and exits with ``exit_code``; a traceback reaches a person only for a real bug. Classes that
callers already catch as ``ValueError`` or ``LookupError`` keep that base as well.

Why no imports at all: this is the base room's base module. Every room imports it, the hook
included (``crystal``, ``frontmatter``, ``config`` and ``fastjson`` define their errors on it), and
the hook's import budget is milliseconds (tests/test_hook_imports.py).
"""


class GeodeError(Exception):
    """Something geode cannot do, said for a person.

    ``str(exc)`` is the message, followed by the ``hint`` (what to do) when there is one;
    ``exit_code`` is the status a command ends with (1 unless the class or the raiser says
    otherwise).
    """

    exit_code = 1

    def __init__(self, message: str = "", *, hint: str = "", exit_code: int | None = None) -> None:
        self.hint = hint
        if hint and message:
            message = f"{message}: {hint}"
        super().__init__(message or hint)
        if exit_code is not None:
            self.exit_code = int(exit_code)


class UsageError(GeodeError):
    """The command was called wrongly (a flag, an argument, a filter); exit status 2, as argparse."""

    exit_code = 2


class StoreError(GeodeError):
    """A note file or a path of the store cannot be read, written or used as asked."""


class RecordsError(GeodeError):
    """The records database (ledger, approval queue, upkeep reports) cannot be opened, read or written."""


class NotFoundError(GeodeError):
    """Nothing by that name or address (a note, an agent, a proposal)."""


class ServiceUnavailable(GeodeError):
    """A part geode talks to cannot be reached or loaded now: Chroma, the broker, the embedding model."""
