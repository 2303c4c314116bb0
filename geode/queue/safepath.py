"""Paths inside a store root, and nowhere else.

A proposal names files by a path relative to its domain's root. Before anything is read or
written, that path must be a plain relative name: no ``..``, no absolute path, no NUL, no
backslash (a separator elsewhere, so a path written on one machine cannot mean a different
file on another), no empty or ``.`` component. Unicode lookalikes (``\u2024\u2024``,
``\uff0e\uff0e``, ``\u2215``) are ordinary characters here and name ordinary files inside the
root; nothing decodes ``%2e`` either.

Symlinks: no component of the path may be a symlink, whether it points inside the root or
out of it. The walk opens each folder with ``O_NOFOLLOW | O_DIRECTORY`` relative to the one
before (``openat``), so a symlink swapped in between a check and a use is refused by the
kernel instead of followed: every later operation (read, temp file, replace, unlink) is made
relative to the folder descriptor the walk returned.

The root itself: an apply or undo opens the store once (``StoreRoot``, a directory descriptor)
and every walk starts from that descriptor, not from the path again, so a store folder renamed
away and replaced by another one at its path (an unmount, a restore) mid-apply is never written
into: the operation goes on in the folder it started on, and ``StoreRoot.same`` tells it the
path no longer names that folder.
"""

from __future__ import annotations

import errno
import os
import stat

from geode.kernel.errors import StoreError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_NAME_BYTES = 255
_MAX_PATH_BYTES = 4000
_MAX_DEPTH = 64  # folders nested deeper than this are a mistake, not a note


class UnsafePath(StoreError, ValueError):
    """The path may not be used; ``reason`` says why."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path!r}: {reason}")
        self.path = path
        self.reason = reason


class StoreUnavailable(StoreError, OSError):
    """The store's root folder cannot be opened (moved away, unmounted, replaced): not the same
    as a file or folder inside it being absent, which ``read`` answers with None. Why its own
    class: an abort that took a missing root for "every file absent" closed an apply as rolled
    back with nothing rolled back (issue 15, point 3)."""


class StoreRoot:
    """A store folder opened once (``O_DIRECTORY``) for a whole apply, undo or reconcile.

    Why: each file operation re-opening the store path wrote an archive copy into another
    folder mounted or restored at that path mid-apply (issue 22, point 2). Every function here
    that takes a ``root`` accepts this handle as well as a path; with the handle, every walk
    starts from its descriptor. ``identity`` is the folder's ``(st_dev, st_ino)``."""

    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = _open_root_path(path)
        st = os.fstat(self.fd)
        self.identity = (st.st_dev, st.st_ino)

    def same(self) -> bool:
        """Whether the store path still names the folder this handle holds (one ``stat``)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def where(self) -> str:
        """Where the held folder is now (it may have been renamed), for messages; the path it was
        opened by when that cannot be told."""
        try:
            return os.readlink(f"/proc/self/fd/{self.fd}")
        except OSError:
            return self.path

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> StoreRoot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __str__(self) -> str:
        return self.path


#: a store root as the functions here take it: its path, or the folder opened once
Root = str | StoreRoot


def split(rel) -> tuple[str, ...]:
    """The components of a safe relative path, or ``UnsafePath``."""
    if not isinstance(rel, str):
        raise UnsafePath(rel, "a path must be text")
    if not rel:
        raise UnsafePath(rel, "empty path")
    if "\x00" in rel:
        raise UnsafePath(rel, "NUL in path")
    if "\\" in rel:
        raise UnsafePath(rel, "backslash in path")
    if rel.startswith("/"):
        raise UnsafePath(rel, "absolute path")
    try:
        encoded = os.fsencode(rel)
    except UnicodeError:
        raise UnsafePath(rel, "not encodable as a file name") from None
    if len(encoded) > _MAX_PATH_BYTES:
        raise UnsafePath(rel, "path too long")
    parts = tuple(rel.split("/"))
    if len(parts) > _MAX_DEPTH:
        raise UnsafePath(rel, f"more than {_MAX_DEPTH} components")
    for part in parts:
        if part == "":
            raise UnsafePath(rel, "empty component (double or trailing slash)")
        if part == "..":
            raise UnsafePath(rel, "'..' component")
        if part == ".":
            raise UnsafePath(rel, "'.' component")
        if len(os.fsencode(part)) > _MAX_NAME_BYTES:
            raise UnsafePath(rel, "name too long")
    return parts


def _root_fd(root: Root) -> int:
    """A descriptor of the root for one walk, closed by the caller: a duplicate of a
    ``StoreRoot``'s (the folder it holds, wherever it is now), or the path opened afresh."""
    if isinstance(root, StoreRoot):
        if root.fd is None:
            raise StoreUnavailable(f"the store folder {root.path} was closed")
        return os.dup(root.fd)
    return _open_root_path(root)


def _open_root_path(root: str) -> int:
    """The root may itself be reached through symlinks (settings store it resolved); an error
    opening it is an I/O error (``OSError``), not a refused path."""
    try:
        return os.open(os.path.realpath(root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreUnavailable(f"the store folder {root} cannot be opened: {exc.strerror or exc}") from exc


def open_parent(root: Root, rel: str, create: bool = False) -> tuple[int, str]:
    """``(dirfd, leaf)``: the folder holding ``rel``, opened without following any symlink.

    ``create`` makes missing folders (mode 0o777 less the umask). The caller closes
    ``dirfd``. Raises ``UnsafePath`` for a symlink or non-folder component and
    ``FileNotFoundError`` for a missing folder when ``create`` is false.
    """
    parts = split(rel)
    fd = _root_fd(root)
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made by someone else meanwhile; the open below checks what it is
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise _component_error(rel, parts, i, fd, exc) from exc
            except OSError as exc:
                raise _component_error(rel, parts, i, fd, exc) from exc
            os.close(fd)
            fd = nxt
        return fd, parts[-1]
    except BaseException:  # clean up, then re-raise: nothing is caught here
        os.close(fd)
        raise


def _component_error(rel, parts, i, fd, exc: OSError) -> Exception:
    where = "/".join(parts[: i + 1])
    try:
        st = os.stat(parts[i], dir_fd=fd, follow_symlinks=False)
    except OSError:
        return exc
    if stat.S_ISLNK(st.st_mode):
        return UnsafePath(rel, f"{where!r} is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        return UnsafePath(rel, f"{where!r} is not a folder")
    return exc


def leaf_stat(dirfd: int, leaf: str, rel: str = "") -> os.stat_result | None:
    """The leaf's own stat (never followed), None when absent; refuses symlinks and non-files."""
    try:
        st = os.stat(leaf, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(rel or leaf, "is a symlink")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(rel or leaf, "is not a regular file")
    return st


def read_at(dirfd: int, leaf: str, rel: str = "") -> tuple[bytes, int] | None:
    """``(bytes, mode)`` of a regular file in ``dirfd``, None when absent. Never follows a
    symlink, never blocks on a FIFO."""
    try:
        fd = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dirfd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise UnsafePath(rel or leaf, "is a symlink") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(rel or leaf, "is not a regular file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), stat.S_IMODE(st.st_mode)
    finally:
        os.close(fd)


def lexists(root: Root, rel: str) -> bool:
    """Whether anything (a symlink too, never followed at the leaf) is at ``rel`` in ``root``."""
    fd = _root_fd(root)
    try:
        os.stat(rel, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    finally:
        os.close(fd)
    return True


def read(root: Root, rel: str) -> tuple[bytes, int] | None:
    """``(bytes, mode)`` of ``rel`` inside ``root``; None when it (or its folder) is absent."""
    try:
        dirfd, leaf = open_parent(root, rel)
    except FileNotFoundError:
        return None
    try:
        return read_at(dirfd, leaf, rel)
    finally:
        os.close(dirfd)


def resolve(root: str, rel: str) -> str:
    """The absolute path of ``rel`` inside ``root`` (it need not exist), or ``UnsafePath``.

    For display and for callers that only need a name; anything that reads or writes should
    go through ``open_parent`` so that a symlink swapped in later is still refused.
    """
    parts = split(rel)
    base = os.path.realpath(root)
    if not os.path.isdir(base):
        raise UnsafePath(root, "store root is not a folder")
    cur = base
    for i, part in enumerate(parts):
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(rel, f"{'/'.join(parts[: i + 1])!r} is a symlink")
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(rel, f"{'/'.join(parts[: i + 1])!r} is not a folder")
    full = os.path.join(base, *parts)
    real = os.path.realpath(full)
    if os.path.commonpath([real, base]) != base or real == base:
        raise UnsafePath(rel, "resolves outside the store root")
    return full
