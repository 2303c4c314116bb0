"""A store whose one archive proposal touches 22 files, as in issue 15's repro: ``team/old.md``
archived (the new ``archive/team/old.md`` first, ``team/old.md`` removed last) with 20 link
rewrites in ``team/n01.md`` .. ``team/n20.md`` between them. Long enough that a fault can hit
the middle of the apply; used by the shared-database race and the store-fault tests.

The store-fault and store-swap tests share their set-up here too: ``world`` (the store, its
settings, the queue and the filed proposal), ``at`` (act once before the apply puts its
``i``-th file, through the apply loop's seam) and ``process_env`` (a real ``geode`` process's
environment for a home)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from geode.queue import changes as CH
from geode.queue import proposals as Q
from tests.stores import NO_BACKGROUND_BUILD, plain_settings, write

LINKERS = 20
FILES = LINKERS + 2
MIDDLE = 11  # files 0..10 replaced (the archived copy and ten link rewrites) when a fault hits the middle
ROOT = Path(__file__).resolve().parent.parent


def make(root: Path) -> None:
    write(root, "team/old.md", "---\nname: old\ndescription: the old way\n---\n# Old\n\nthe old way.\n")
    for i in range(1, LINKERS + 1):
        write(
            root,
            f"team/n{i:02d}.md",
            f"---\nname: n{i}\ndescription: note {i}\n---\n# Note {i}\n\nSee [the old way](old.md).\n"
            + f"filler {i}\n" * 200,
        )


def file_archive(settings, engine, domain: str) -> int:
    """File the 22-file archive proposal in ``domain``; its id."""
    root = Path(settings.domains[domain])
    rewrites = {
        f"team/n{i:02d}.md": (root / f"team/n{i:02d}.md")
        .read_bytes()
        .replace(b"](old.md)", b"](../archive/team/old.md)")
        for i in range(1, LINKERS + 1)
    }
    changes = CH.archive_changes(settings, domain, "team/old.md", rewrites=rewrites)
    assert len(changes) == FILES
    pid = Q.file_proposal(
        settings,
        engine,
        Q.ProposalDraft(
            agent="cleaner",
            kind="archive",
            domain=domain,
            title="archive team/old.md",
            rationale="superseded",
            evidence=[{"finding": 1}],
            changes=changes,
            run_id="run-1",
            key=hashlib.sha256(str(root).encode()).hexdigest(),
        ),
    )
    assert pid is not None
    return pid


def states(root: Path, proposal: dict) -> list[str]:
    """Each file of ``proposal`` as found now: ``before``, ``after`` or ``other``."""
    out = []
    for c in proposal["changes"]:
        p = root / c["path"]
        sha = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
        out.append("before" if sha == c["before_sha"] else "after" if sha == c["after_sha"] else "other")
    return out


@contextmanager
def world(tmp_path: Path) -> Iterator[tuple]:
    """``(settings, engine, store, proposal id)``: the store at ``tmp_path/S`` made, its home at
    ``tmp_path/home``, the archive proposal filed; the engine disposed afterwards."""
    store = tmp_path / "S"
    make(store)
    s = plain_settings(tmp_path / "home", store)
    engine = Q.open_queue(s)
    try:
        yield s, engine, store, file_archive(s, engine, "main")
    finally:
        engine.dispose()


def at(monkeypatch, i: int, act: Callable[[], None]) -> list[int]:
    """Run ``act()`` once, before the apply puts its ``i``-th file; the calls seen."""
    from geode.queue import apply

    seen: list[int] = []

    def hook(k: int, n: int) -> None:
        seen.append(k)
        if k == i and len(seen) == i + 1:
            act()

    monkeypatch.setattr(apply, "before_file", hook)
    return seen


def process_env(home: Path) -> dict[str, str]:
    """The environment of a real ``geode`` process in ``home``: this one's without any
    ``GEODE_`` variable, no background build, the checkout on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT)})
    return env
