"""The groups the Cleaner caps, by the store's own hierarchy, and how to split one that is over.

Why: a Dendron vault is a flat folder by that tool's design: its hierarchy is in the dotted file
names (``ops.db.backup.md`` is the child ``backup`` of ``ops.db``). Counting the folder's files
called a 1,000-note vault one folder "over its cap" and proposed archiving 962 of them. In such
a store each dotted level is a group; elsewhere a group is a folder.

``dendron_like_store`` says yes where the store flavour (``geode.links.flavour``) is Dendron
(``dendron.yml`` at the store or its workspace above it) and also where most note names are
dotted: the flavour decides how links resolve and needs the tool's own file, but a folder of
dotted names is a hierarchy for capping whether or not the workspace file sits beside it. The
rest of this module takes a plain ``bool``.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from geode.cleaner.notes import folder_of
from geode.links.flavour import found_above

#: share of note names that must be dotted (``a.b.md``) for a store without ``dendron.yml`` to
#: be read as a dotted hierarchy
DOTTED_SHARE = 0.6
_SUFFIX = re.compile(r"\.(md|mdc|markdown)$", re.IGNORECASE)


def _stem(path: str) -> str:
    return _SUFFIX.sub("", path.rsplit("/", 1)[-1])


def dendron_like_store(root: str, paths) -> bool:
    """Whether the store keeps its hierarchy in dotted names: ``dendron.yml`` at its root, or
    most note names dotted like ``a.b.c.md`` (see above)."""
    if os.path.isfile(os.path.join(root, "dendron.yml")) or found_above(root, "dendron.yml", 1):
        return True
    names = [_stem(p) for p in paths]
    if len(names) < 2:
        return False
    dotted = sum(1 for n in names if "." in n.strip("."))
    return dotted >= DOTTED_SHARE * len(names)


def group_of(path: str, dotted: bool) -> str:
    """The group a note is capped in: its folder, or in a dotted store its folder and the
    dotted parent of its name (``notes/ops.db.backup.0001.md`` -> ``notes/ops.db.backup``)."""
    folder = folder_of(path)
    if not dotted:
        return folder
    stem = _stem(path)
    parent = stem.rsplit(".", 1)[0] if "." in stem.strip(".") else ""
    if not parent:
        return folder
    return f"{folder}/{parent}" if folder else parent


def shown(group: str, dotted: bool, folders: set[str]) -> str:
    """How a group is named to a person: a folder as itself (``.`` for the root), a dotted
    level as ``name.*``."""
    if group in folders or not dotted:
        return group or "."
    return group + ".*"


def split_suggestion(members: list[str], dotted: bool, limit: int = 6) -> str:
    """How to bring a group down without archiving: by the hierarchy its names already carry.

    The leading word of the names (``db-backup.md`` -> a folder ``db``; in a dotted store
    ``ops.db-backup.md`` -> one level deeper, ``ops.db.backup.md``). Empty when the names share
    no prefix worth a group."""
    counts: Counter = Counter()
    for p in members:
        leaf = _stem(p).rsplit(".", 1)[-1] if dotted else _stem(p)
        head = re.split(r"[-_. ]", leaf, maxsplit=1)[0] if re.search(r"[-_. ]", leaf) else ""
        if head:
            counts[head] += 1
    groups = [(h, n) for h, n in counts.most_common() if n > 1]
    if len(groups) < 2:
        return ""
    listed = ", ".join(f"{h} ({n})" for h, n in groups[:limit]) + (
        f" and {len(groups) - limit} more" if len(groups) > limit else ""
    )
    if dotted:
        return f"split it one level deeper in the dotted hierarchy, by the names' leading word: {listed}"
    return f"split it into subfolders by the names' leading word: {listed}"
