"""Where a store's own tool publishes every file as a page, and where a draft may go instead.

Why: a merge draft (``X.merge.md``) written into a Hugo ``content/``, an mkdocs ``docs/`` or an
mdBook ``src/`` is published by that tool as a page the next time the site is built. So the
Cleaner asks here before it places a new file:

- ``mkdocs.yml`` at the store's root: its ``docs_dir`` (default ``docs``) is published;
- ``book.toml`` at the root: its ``[book] src`` (default ``src``) is published;
- ``hugo.toml``/``hugo.yaml``/``hugo.json`` at the root, or ``config.toml``/``config.yaml``/
  ``config.json`` beside a ``content`` folder (or naming ``contentDir``): ``contentDir``
  (default ``content``) is published;
- any of those files up to two folders above the store, with the store inside the folder the
  tool publishes: the whole store is published.

A draft in a store that publishes goes to ``DRAFTS`` (``.geode/drafts/`` at the store's root:
no tool above publishes it, and the store walk skips ``.geode``), never beside the note. Where
the whole store is published there is no such place: the draft stays in the finding.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

DRAFTS = ".geode/drafts"
_MKDOCS_DIR = re.compile(r"^docs_dir\s*:\s*['\"]?([^'\"#\s]+)", re.M)
_BOOK_SRC = re.compile(r"^\s*src\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_HUGO_DIR = re.compile(r"^\s*['\"]?contentDir['\"]?\s*[:=]\s*['\"]?([^'\"#\s,]+)", re.M | re.I)


@dataclass(frozen=True)
class Published:
    """``tool`` publishes ``tree`` (a folder relative to the store root; ``.`` is all of it)."""

    tool: str
    config: str  # the configuration file that says so, as found
    tree: str

    def holds(self, path: str) -> bool:
        return self.tree == "." or path == self.tree or path.startswith(self.tree.rstrip("/") + "/")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(200_000)
    except OSError:
        return ""


def _at(folder: str) -> tuple[str, str, str] | None:
    """``(tool, config file, published folder relative to ``folder``)`` for a site rooted here."""
    p = os.path.join(folder, "mkdocs.yml")
    if os.path.isfile(p):
        m = _MKDOCS_DIR.search(_read(p))
        return "mkdocs", p, (m.group(1) if m else "docs").strip("/") or "."
    p = os.path.join(folder, "book.toml")
    if os.path.isfile(p):
        m = _BOOK_SRC.search(_read(p))
        return "mdbook", p, (m.group(1) if m else "src").strip("/") or "."
    for name in ("hugo.toml", "hugo.yaml", "hugo.json", "config.toml", "config.yaml", "config.json"):
        p = os.path.join(folder, name)
        if not os.path.isfile(p):
            continue
        m = _HUGO_DIR.search(_read(p))
        tree = (m.group(1) if m else "content").strip("/") or "."
        if name.startswith("hugo") or m or os.path.isdir(os.path.join(folder, tree)):
            return "hugo", p, tree
    return None


def published(root: str) -> Published | None:
    """The tree of this store its tool publishes (see the module's docstring), or None."""
    real = os.path.realpath(root)
    got = _at(real)
    if got is not None:
        return Published(got[0], got[1], got[2])
    cur = real
    for _ in range(2):
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
        got = _at(cur)
        if got is None:
            continue
        tree = os.path.normpath(os.path.join(cur, got[2]))
        if real == tree or real.startswith(tree + os.sep) or got[2] == ".":
            return Published(got[0], got[1], ".")
        return None
    return None


def draft_path(root: str, note_path: str, stem: str) -> str | None:
    """Where a draft about ``note_path`` goes: beside it, or under ``DRAFTS`` when its tool
    publishes the note's folder; None when the whole store is published."""
    pub = published(root)
    folder = note_path.rsplit("/", 1)[0] if "/" in note_path else ""
    name = f"{stem}.merge.md"
    if pub is None or not pub.holds(note_path):
        return f"{folder}/{name}" if folder else name
    if pub.tree == ".":
        return None
    return f"{DRAFTS}/{folder + '/' if folder else ''}{name}"
