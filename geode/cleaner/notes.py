"""What the Cleaner reads off a note or a path, shared by its three checks (contradictions,
near-duplicates, folders over their cap) and the run that drives them: a note's folder, a
frontmatter date, the targets of a ``supersedes`` field, and the idempotency key of a proposal.
Apart so that each check's module imports these from one place and none imports another check.
"""

from __future__ import annotations

import datetime as _dt
import hashlib

from geode.delivery.dates import DateError, optional_date


def folder_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def date_of(note, key: str) -> _dt.date | None:
    """The date of a frontmatter field (``geode.delivery.dates``); None when absent or unreadable
    (the lint reports that as date-not-iso): an unreadable date is never compared as text."""
    try:
        return optional_date(note.frontmatter.get(key), key)
    except DateError:
        return None


def supersedes_targets(value) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for t in items:
        if t in (None, "") or isinstance(t, (dict, list)):
            continue
        t = str(t).strip()
        if t.startswith("[[") and t.endswith("]]"):
            t = t[2:-2].split("|", 1)[0]
        if t:
            out.append(t)
    return out


def proposal_key(raw: str) -> str:
    return raw if len(raw) <= 255 else raw[:180] + ":" + hashlib.sha256(raw.encode()).hexdigest()
