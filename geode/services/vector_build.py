"""The vector build that ``geode init``, ``geode run`` and ``geode reindex --no-wait`` leave
running in the background, and what doctor reads of it.

Why in the background: the text index is enough for prompt-time recall to answer from the first
prompt, but search by meaning (a German note for an English question) needs each note's vector,
and embedding a large store takes minutes that a set-up command must not hold the terminal for.

Why a detached grandchild rather than a child: the command that starts the build exits at once
and must leave no zombie behind, in a short command or in a long-lived process (the test runner,
``geode web``). A small launcher process starts the embedder in its own session and exits; the
caller waits for the launcher only (tens of milliseconds), and the embedder, orphaned, is reaped
by init. The embedder is ``python -m geode.recall.vectors``, the one writer under the writer lock:
a second start while one runs does nothing.

What is left behind: ``GEODE_HOME/vectors-build.json`` (when and by which process the build was
started, how many notes waited) and ``GEODE_HOME/vectors-build.log`` (the embedder's stderr).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal, TypedDict, cast


class VectorBuild(TypedDict, total=False):
    """What :func:`start_vector_build` did (the ``vectors`` object of ``geode init --json``)."""

    state: Literal["started", "running", "done", "not-started"]
    why: str  # not-started: the reason
    notes: int  # notes in the recall index
    waiting: int  # notes among them without a vector
    pid: int  # started: the embedder's process
    started_at: float  # started: when (epoch seconds)


#: When and with what the last background build was started.
STAMP_FILE = "vectors-build.json"
#: The background embedder's stderr (a model that cannot load says so here).
LOG_FILE = "vectors-build.log"


def notes_without_vectors(settings, model_id: str | None = None) -> tuple[int, int]:
    """(notes in the recall index, notes among them without a current vector). Without
    ``model_id`` a vector of any model counts (what can be said without loading the model)."""
    from sqlalchemy import func, select

    from geode.recall.index_tables import notes_t
    from geode.recall.recall_index import RecallIndex

    c = notes_t.c
    current = (c.embed_hash == c.embed_text_hash) & c.embed_model.isnot(None)
    if model_id:
        current = current & (c.embed_model == model_id)
    doms = list(settings.domains)
    with RecallIndex(settings).reader.connect() as conn:
        total = conn.execute(select(func.count()).select_from(notes_t).where(c.domain.in_(doms))).scalar_one()
        done = conn.execute(select(func.count()).select_from(notes_t).where(c.domain.in_(doms), current)).scalar_one()
    return int(total), int(total) - int(done)


def start_vector_build(settings) -> VectorBuild:
    """Start embedding the notes that have no vector yet, detached; return at once.

    ``{"state": ...}``: ``started`` (with the ``pid`` and how many notes wait), ``running``
    (another writer holds the lock: it embeds them), ``done`` (every note has a vector), or
    ``not-started`` (with ``why``). Never raises for a build that cannot start: the text index
    works without vectors, and doctor reports vectors far behind."""
    from geode.recall import vectors

    try:
        total, missing = notes_without_vectors(settings)
        if vectors.writer_active(settings):
            return {"state": "running", "notes": total, "waiting": missing}
    except (OSError, ValueError) as exc:
        return {"state": "not-started", "why": f"{type(exc).__name__}: {exc}"}
    if missing == 0:
        return {"state": "done", "notes": total, "waiting": 0}
    if not settings.recall.background_build:
        return {"state": "not-started", "why": "[recall] background_build is off: `geode reindex` embeds them"}
    home = Path(settings.home)
    args = [sys.executable, "-m", "geode.recall.vectors", "--home", str(home)]
    if settings.one_off_store:
        args += ["--store", next(iter(settings.domains.values()))]
    try:
        pid = vectors.launch_detached(args, str(home / LOG_FILE))  # a launcher's grandchild: no zombie
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return {"state": "not-started", "why": f"{type(exc).__name__}: {exc}"}
    stamp: VectorBuild = {"started_at": time.time(), "pid": pid, "notes": total, "waiting": missing}
    try:
        (home / STAMP_FILE).write_text(json.dumps(stamp) + "\n", encoding="utf-8")
    except OSError:
        pass  # the build runs anyway; doctor then sees it only through the writer lock
    return {"state": "started", **stamp}


def last_build(home: str) -> VectorBuild | None:
    """The stamp of the last background build (``started_at``, ``pid``, ``notes``, ``waiting``),
    or None."""
    try:
        data = json.loads((Path(home) / STAMP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cast(VectorBuild, data) if isinstance(data, dict) else None


def describe(r: VectorBuild) -> str:
    """One line for people: what became of the vectors."""
    state = r.get("state")
    n = r.get("waiting", 0)
    notes = f"{n} note{'' if n == 1 else 's'}"
    if state == "started":
        return f"embedding {notes} in the background (search by meaning follows; `geode status` shows how far)"
    if state == "running":
        return f"a vector build is already running ({notes} without a vector)"
    if state == "done":
        return "every note has its vector"
    return f"not started ({r.get('why')}): run `geode reindex`"
