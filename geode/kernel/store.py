"""Walking a store: every readable note loads, every unreadable file is named and skipped.

Bad input never takes the store down. Each file is read on its own; a failure becomes a
``Problem`` naming the file and line, and the walk goes on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from geode.kernel.crystal import (
    DEFAULT_MAX_BYTES,
    NOTE_SUFFIXES,
    SKIP_DIRS,
    NoteError,
    name_is_utf8,
    read_text,
    shown_name,
)
from geode.kernel.note import Note, parse_note
from geode.kernel.problems import Problem


@dataclass
class StoreLoad:
    root: str
    domain: str
    notes: list[Note] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files_seen: int = 0  # note-suffixed files found, loaded or not
    folders: int = 0

    @property
    def skipped(self) -> list[Problem]:
        return [p for p in self.problems if p.code.startswith("skip-") or p.code == NAME_NOT_UTF8]


def is_note_file(name: str) -> bool:
    return name.endswith(NOTE_SUFFIXES) and not name.startswith(".")


#: the problem code of a file or folder whose name is not UTF-8: named (its bad bytes as
#: ``\\xNN``) and skipped by every walk, since no index, ledger or JSON can hold the name
NAME_NOT_UTF8 = "name-not-utf8"


def bad_name_problem(rel: str, domain: str = "", folder: bool = False) -> Problem:
    """The ``name-not-utf8`` problem of ``rel`` (as the walk decoded it, ``surrogateescape``)."""
    what = "folder name" if folder else "file name"
    seen = ": the notes in it are not seen" if folder else ""
    return Problem(
        shown_name(rel), 0, NAME_NOT_UTF8, "error", f"{what} is not UTF-8; skipped (rename it){seen}", domain
    )


def read_note_file(
    root: str | os.PathLike[str], rel: str, max_bytes: int = DEFAULT_MAX_BYTES, domain: str = ""
) -> Note | Problem:
    """Read and parse one file, or say exactly why it cannot be a note."""
    if not name_is_utf8(rel):
        return bad_name_problem(rel, domain)
    try:
        return parse_note(read_text(str(root), rel, max_bytes), rel)
    except NoteError as exc:
        code = exc.code if exc.code.startswith("skip-") else "skip-" + exc.code
        return Problem(rel, exc.line, code, exc.severity, exc.message, domain)
    except RecursionError:
        return Problem(rel, 0, "skip-too-deep", "error", "structure nested too deeply to read; skipped", domain)


def walk(root: str | os.PathLike[str], onerror=None):
    """``os.walk(root, followlinks=False, onerror=onerror)``, top-down (prune ``dirnames`` in
    place), as a loop over a stack: Python 3.11's ``os.walk`` recurses once per level, so a store
    nested about 1,000 folders deep raised ``RecursionError`` in every command that walks it.
    A folder that cannot be listed is skipped and, as with ``os.walk``, handed to
    ``onerror(path, exc)``: a walk that cannot see must be able to say so (issue 15, point 4:
    a ``chmod 000`` folder of 30 notes went unnoticed by upkeep, doctor and lint)."""
    stack = [os.fspath(root)]
    while stack:
        top = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(top) as it:
                for e in it:
                    try:
                        is_dir = e.is_dir()  # a symlink to a folder is listed here, not entered
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(e.name)
        except OSError as exc:
            if onerror is not None:
                onerror(top, exc)
            continue
        yield top, dirs, files
        for d in reversed(dirs):
            full = os.path.join(top, d)
            if not os.path.islink(full):
                stack.append(full)


#: the problem code of a folder the walk could not list
UNENTERED = "skip-unreadable-dir"


def unentered(load: StoreLoad) -> list[Problem]:
    """The folders a walk could not see into: unreadable ones, and symlinked ones that point
    outside the store (not followed, so their notes are never seen)."""
    return [p for p in load.problems if p.code == UNENTERED or (p.code == "skip-symlink-dir" and p.severity == "error")]


def has_notes(root: str | os.PathLike[str]) -> bool:
    """Whether ``root`` holds any note file, by the store's walk (a loop: no depth limit, no
    symlinked folder followed); what ``any(Path(root).rglob("*.md"))`` asked, recursively."""
    return next(iter_note_paths(root), None) is not None


def iter_note_paths(root: str | os.PathLike[str], load: StoreLoad | None = None):
    """Relative POSIX paths of note files, in a stable order; symlinked folders are not followed."""
    root_real = os.path.realpath(root)

    def cannot_enter(path: str, exc: OSError) -> None:
        if load is not None:
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            load.problems.append(
                Problem(
                    rel if rel != "." else str(root),
                    0,
                    UNENTERED,
                    "error",
                    f"folder cannot be entered ({exc.strerror or exc}): the notes in it are not seen",
                    load.domain,
                )
            )

    for dirpath, dirnames, filenames in walk(root, cannot_enter):
        keep = []
        for d in sorted(dirnames):
            if d in SKIP_DIRS:
                continue
            if not name_is_utf8(d):
                if load is not None:
                    rel = os.path.relpath(os.path.join(dirpath, d), root).replace(os.sep, "/")
                    load.problems.append(bad_name_problem(rel, load.domain, folder=True))
                continue
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                if load is not None:
                    rel = os.path.relpath(full, root).replace(os.sep, "/")
                    target = os.path.realpath(full)
                    inside = target == root_real or target.startswith(root_real + os.sep)
                    load.problems.append(
                        Problem(
                            rel,
                            0,
                            "skip-symlink-dir",
                            "error" if not inside else "info",
                            f"symlinked folder ({'inside' if inside else 'outside'} the store, to {target}) is not followed"
                            + ("" if inside else ": the notes in it are not seen"),
                            load.domain,
                        )
                    )
                continue
            keep.append(d)
        dirnames[:] = keep
        if load is not None:
            load.folders += 1
        for name in sorted(filenames):
            if is_note_file(name):
                if not name_is_utf8(name):
                    if load is not None:
                        load.files_seen += 1
                        rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                        load.problems.append(bad_name_problem(rel, load.domain))
                    continue
                yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def load_store(root: str | os.PathLike, domain: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> StoreLoad:
    """Load every note under ``root``; unreadable files become problems, never exceptions."""
    root_path = Path(root)
    load = StoreLoad(root=str(root_path), domain=domain)
    if not root_path.is_dir():
        load.problems.append(Problem(str(root_path), 0, "no-store", "error", "store folder does not exist", domain))
        return load
    for rel in iter_note_paths(root_path, load):
        load.files_seen += 1
        result = read_note_file(root_path, rel, max_bytes, domain)
        if isinstance(result, Problem):
            load.problems.append(result)
        else:
            load.notes.append(result)
    return load
