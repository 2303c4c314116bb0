"""A store's folders and their mtimes, walked by the store's rules (``SKIP_DIRS``, no symlinks
followed): what ``RecallIndex.refresh`` stores and ``quick_refresh`` compares, so that a search
re-reads only the folders whose mtime moved.

Apart from ``geode.recall.recall_index`` because it is a file-system walk with no database.
"""

from __future__ import annotations

import os

from geode.kernel.crystal import name_is_utf8
from geode.kernel.store import SKIP_DIRS


def folder_mtimes(root: str, recurse_known: dict | None = None, prefix: str = "") -> dict[str, int]:
    """Every folder under ``root`` (relative, "" for the root) and its mtime; the store's walk rules.
    With ``recurse_known``, folders already known are not descended into (their own mtime says
    whether they changed); names are relative to the store when ``prefix`` is the root's path."""
    if recurse_known is not None:
        out_k: dict[str, int] = {}
        try:
            it = os.scandir(root)
        except OSError:
            return out_k
        with it:
            for e in it:
                if e.name in SKIP_DIRS or not name_is_utf8(e.name):  # the walk names it; no row holds it
                    continue
                try:
                    if not e.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                sub = f"{prefix}/{e.name}" if prefix else e.name
                if sub in recurse_known:
                    continue
                out_k[sub] = 0
                for k, v in folder_mtimes(e.path).items():
                    out_k[f"{sub}/{k}" if k else sub] = v
        return out_k
    out: dict[str, int] = {}
    try:
        out[""] = os.stat(root).st_mtime_ns
    except OSError:
        return out
    stack = [""]
    while stack:
        rel = stack.pop()
        full = os.path.join(root, rel) if rel else root
        try:
            it = os.scandir(full)
        except OSError:
            continue
        with it:
            for e in it:
                if e.name in SKIP_DIRS or not name_is_utf8(e.name):  # the walk names it; no row holds it
                    continue
                try:
                    if e.is_dir(follow_symlinks=False):
                        sub = f"{rel}/{e.name}" if rel else e.name
                        out[sub] = e.stat(follow_symlinks=False).st_mtime_ns
                        stack.append(sub)
                except OSError:
                    continue
    return out
