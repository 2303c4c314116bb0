"""Where a markdown link's path may point: the one rule the Librarian (``geode.links.resolver``)
and the note page (``geode.recall.context``, ``geode read``, the web note page) both judge a
``[text](path)`` link by.

Apart because the two live in rooms that may not import each other (recall sits below links),
and two copies of the rule disagreed: the page fell back to a name lookup anywhere in the store
when the path missed, so ``[c](c.md)`` beside no ``c.md`` counted as resolved on the page while
the Librarian called it broken (issue 24). A markdown link is a path: the file is there or not.
"""

from __future__ import annotations

import posixpath

from geode.kernel.crystal import NOTE_SUFFIXES


def markdown_rel(note_path: str, target: str) -> str | None:
    """``target`` relative to the store root: from the note's folder, or from the root when it
    starts with ``/``; ``""`` for the root itself, None when it leaves the store."""
    if target.startswith("/"):
        p = posixpath.normpath(target.lstrip("/"))
    else:
        base = note_path.rsplit("/", 1)[0] if "/" in note_path else ""
        p = posixpath.normpath(posixpath.join(base, target))
    if p == ".":
        return ""
    if p.startswith("../") or p == "..":
        return None
    return p


def markdown_candidates(rel: str) -> list[str]:
    """The files a root-relative markdown path may open, in order: itself, and for a path with
    no suffix the note, the folder's README or index (``[x](guide)`` opens ``guide.md``)."""
    out = [rel]
    if not rel.lower().endswith(NOTE_SUFFIXES) and "." not in rel.rsplit("/", 1)[-1]:
        out += [rel + ".md", rel + "/README.md", rel + "/index.md"]
    return out
