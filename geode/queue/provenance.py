"""Which facts of a store geode itself wrote: read back from the applied proposals.

Why: a trusting person approves every proposal. If the next night reads what those proposals
wrote as evidence (a ``status: superseded`` a merge set, the ``supersedes`` of a merge stub, a
folder "over its cap" counted with geode's own stubs), each night justifies the next one's
harm. An agent asks this module, before it rests a proposal on a fact, who wrote the fact.

Read from the queue's own records (``proposal`` with status ``applied`` and its
``proposal_change`` rows, in the order they were applied), for one domain:

- ``created``: files that exist only because an applied proposal created them (a merge draft, a
  Gardener stub: a ``create`` that is not the new place of a moved note). Every fact in such a
  file is geode's.
- ``written``: per file, the frontmatter keys an applied proposal changed, with the value it
  wrote (a key it removed is written as absent). A move carries its source's record to the new
  place. A fact is geode's when the file's current value is the one geode wrote; once a person
  writes another value, it is theirs.
- ``moved``: new place -> old place of every applied move.
- ``lines``: per file, the text of each non-blank line an applied proposal added to it (a link
  it rewrote, a binding it widened, a key it set). A line is geode's while the file still holds
  that very text; once a person rewrites it, it is theirs.

An undone proposal is not ``applied``: what it wrote is gone, and so is its record here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy import inspect, select

from geode.queue.tables import C, P

ABSENT = object()


def _frontmatter(data: bytes | None, path: str) -> dict:
    if data is None:
        return {}
    from geode.kernel.errors import GeodeError
    from geode.kernel.note import parse_note

    try:
        return dict(parse_note(bytes(data).decode("utf-8"), path).frontmatter)
    except (UnicodeDecodeError, GeodeError, ValueError):
        return {}


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    return [t.rstrip("\r") for t in bytes(data).decode("utf-8", "replace").split("\n")]


def _same(a, b) -> bool:
    if a is ABSENT or b is ABSENT:
        return a is b
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@dataclass
class Fact:
    """One fact a proposal rests on: a frontmatter value, a file, a count, and who wrote it."""

    path: str
    what: str  # "status superseded", "supersedes", "exists", ...
    by_geode: int | None = None  # the applied proposal that wrote it, or None: a person's

    def __str__(self) -> str:
        who = f"written by proposal #{self.by_geode}" if self.by_geode else "written by a person"
        return f"{self.path}: {self.what} ({who})"


@dataclass
class Provenance:
    created: dict[str, int] = field(default_factory=dict)  # path -> proposal id that created it
    written: dict[str, dict[str, tuple[object, int]]] = field(default_factory=dict)  # path -> key -> (value, pid)
    moved: dict[str, str] = field(default_factory=dict)  # new path -> old path
    moved_by: dict[str, int] = field(default_factory=dict)  # new path -> the move's proposal id
    lines: dict[str, dict[str, int]] = field(default_factory=dict)  # path -> line text -> pid

    def wrote_line(self, path: str, text: str) -> int | None:
        """The applied proposal that wrote this line of the file (its text as it is now), or
        None when the line is a person's."""
        if path in self.created:
            return self.created[path]
        if not text.strip():
            return None
        return self.lines.get(path, {}).get(text.rstrip("\r"))

    def made_by_geode(self, path: str) -> int | None:
        """The applied proposal that created this file, or None when a person's file."""
        return self.created.get(path)

    def wrote(self, path: str, key: str, current=ABSENT) -> int | None:
        """The applied proposal whose value of ``key`` the file still holds (``current``), or
        None when the value is a person's (never written by geode, or written over since)."""
        if path in self.created:
            return self.created[path]
        got = self.written.get(path, {}).get(key)
        if got is None:
            return None
        value, pid = got
        return pid if _same(value, current) else None

    def fact(self, path: str, key: str, current, what: str) -> Fact:
        return Fact(path, what, self.wrote(path, key, current))


def load_provenance(engine, domain: str) -> Provenance:
    """What the applied proposals of ``domain`` wrote (see the module's docstring). An engine
    without the queue's tables (nothing was ever filed) wrote nothing."""
    out = Provenance()
    if engine is None or not inspect(engine).has_table("proposal"):
        return out
    with engine.connect() as conn:
        rows = conn.execute(
            select(P.c.id).where(P.c.status == "applied", P.c.domain == domain).order_by(P.c.updated_at, P.c.id)
        ).all()
        ids = [r.id for r in rows]
        changes: dict[int, list] = {}
        for start in range(0, len(ids), 500):
            for c in conn.execute(
                select(C.c.proposal_id, C.c.seq, C.c.path, C.c.before_sha, C.c.after_sha, C.c.before, C.c.after)
                .where(C.c.proposal_id.in_(ids[start : start + 500]))
                .order_by(C.c.proposal_id, C.c.seq)
            ).mappings():
                changes.setdefault(c["proposal_id"], []).append(c)
    for pid in ids:
        cs = changes.get(pid, [])
        made = [c for c in cs if c["before_sha"] is None]
        gone = [c for c in cs if c["after_sha"] is None]
        move = (made[0], gone[0]) if len(made) == 1 and len(gone) == 1 else None
        if move is not None:
            new, old = move[0]["path"], move[1]["path"]
            out.moved[new] = out.moved.get(old, old)
            out.moved_by[new] = pid
            if old in out.written:
                out.written[new] = out.written.pop(old)
            if old in out.lines:
                out.lines[new] = out.lines.pop(old)
            if old in out.created:
                out.created[new] = out.created.pop(old)
        for c in cs:
            path = c["path"]
            if c["after_sha"] is None:
                if move is None or path != move[1]["path"]:
                    out.created.pop(path, None)
                    out.written.pop(path, None)
                    out.lines.pop(path, None)
                continue
            if c["before_sha"] is None and move is None:
                out.created[path] = pid
                continue
            before = move[1]["before"] if move is not None and path == move[0]["path"] else c["before"]
            was = set(_lines(before))
            added = out.lines.setdefault(path, {})
            for text in _lines(c["after"]):
                if text not in was and text.strip():
                    added[text] = pid
            fb, fa = _frontmatter(before, path), _frontmatter(c["after"], path)
            rec = out.written.setdefault(path, {})
            for key in set(fb) | set(fa):
                va, vb = fa.get(key, ABSENT), fb.get(key, ABSENT)
                if not _same(va, vb):
                    rec[key] = (va, pid)
    return out
