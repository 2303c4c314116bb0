"""Doctor's word on the binding index while its first build runs in the background.

Why a check of its own: the first build of a large store runs off the hook (a detached builder,
``geode.delivery.index_build``), for about 30 s at 100,000 notes. Meanwhile the hook delivers
nothing; doctor must say so ("index building": not green, since nothing is delivered yet), and
must neither crash nor wait on the builder's write lock nor start a second build of its own.
When no builder runs, doctor's usual index checks (``doctor.index_checks``) run as before.
"""

from __future__ import annotations

import time
from typing import Any


def building(settings) -> tuple[bool, dict[str, Any], str] | None:
    """``(ok, examined, message)`` of the ``index`` check while a background build runs (never
    ok); None when none runs."""
    from geode.delivery.index import index_path
    from geode.delivery.index_build import running

    info = running(index_path(settings))
    if info is None:
        return None
    pid, started = int(info.get("pid") or 0), float(info.get("started_at") or 0.0)
    since = f", started {max(0, round(time.time() - started))} s ago" if started else ""
    return (
        False,
        {"building": True, "pid": pid},
        f"index building: the first build of the binding index runs in the background (process {pid}{since}); "
        "the hook delivers nothing until it finishes",
    )
