"""Doctor's ``names`` check: the files and folders of the store whose names are not UTF-8.

Apart from ``geode.services.doctor`` because it is a walk of names alone (no file is read):
such a name is skipped by the index, recall, the agents and the hook (no row, no JSON and no
terminal can hold it), so it is the one place a person learns the file is there at all.
"""

from __future__ import annotations

import os
from typing import Any

from geode.kernel.store import NAME_NOT_UTF8, StoreLoad, iter_note_paths


def names_check(settings) -> tuple[bool, dict[str, Any], str]:
    """``(ok, examined, message)``: green only when every note file and folder has a UTF-8 name."""
    bad: list[str] = []
    seen = 0
    for domain, root in settings.domain_roots():
        if not os.path.isdir(root):
            continue
        load = StoreLoad(root=root, domain=domain)
        seen += sum(1 for _ in iter_note_paths(root, load))
        bad += [f"{domain}:{p.path}" for p in load.problems if p.code == NAME_NOT_UTF8]
    if not bad:
        return True, {"files": seen, "not_utf8": 0}, f"every name of the {seen} note files is UTF-8"
    more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
    return (
        False,
        {"files": seen, "not_utf8": len(bad)},
        f"{len(bad)} name(s) not UTF-8, skipped by the index, recall, the agents and the hook "
        f"(rename them): {', '.join(bad[:10])}{more}",
    )
