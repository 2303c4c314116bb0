"""Progress of long work (reindex, embedding, upkeep) for a person watching a terminal.

Why here and this way: a reindex of a large store or a first embedding takes minutes, and a
silent terminal looks hung. The display goes to stderr, only when stderr is a terminal and the
command was not asked for ``--json`` (a script reading the output, or a log file, gets nothing
but the result), and uses ``rich.progress`` (a bar, counts, rate and time left, redrawn in place).

Use::

    with progress_display(enabled=show_progress(args)) as task:
        idx.refresh(progress=task("text"))   # task(label) -> callable(done, total)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Callback = Callable[[int, int], None]


def show_progress(args: Any = None, stream: Any = None) -> bool:
    """True when a person watches: stderr is a terminal and no ``--json`` was asked for."""
    s = stream if stream is not None else sys.stderr
    if getattr(args, "json", False):
        return False
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _quiet(done: int, total: int) -> None:
    """The callback when nobody watches: does nothing."""


@contextmanager
def progress_display(enabled: bool, stream: Any = None) -> Iterator[Callable[[str], Callback]]:
    """A factory of progress callbacks, one bar per label, all on one live display on stderr.
    Disabled, every callback does nothing and rich is not even imported."""
    if not enabled:
        yield lambda label: _quiet
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(file=stream if stream is not None else sys.stderr)
    bars = Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
    tasks: dict[str, Any] = {}

    def task(label: str) -> Callback:
        def update(done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bars.add_task(label, total=max(total, 0))
            bars.update(tasks[label], completed=done, total=max(total, 0))

        return update

    with bars:
        yield task


@contextmanager
def spinner(enabled: bool, text: str, stream: Any = None) -> Iterator[Callable[[str], None]]:
    """A one-line status with elapsed time for work whose size is not known in advance (an
    agent examining the store); yields a function that changes the text. Disabled: nothing."""
    if not enabled:
        yield lambda _t: None
        return
    from rich.console import Console

    console = Console(file=stream if stream is not None else sys.stderr)
    with console.status(text) as status:
        yield lambda t: status.update(t)
