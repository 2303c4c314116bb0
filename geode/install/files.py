"""How the installer reads and writes an agent's JSON config, and the error it raises.

Apart from the hooks and the MCP registration because both edit the user's files the same way:
a file we cannot parse is never rewritten (the error names the file, line and column); writes
are atomic (same-folder temp file, fsync, ``os.replace``, fsync of the folder), keep the file's
mode, and are refused when the file changed while geode was editing it. Standard library only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geode.kernel.errors import GeodeError


class InstallError(GeodeError):
    """The hooks cannot be installed or removed safely; the message says which file and why."""


@dataclass(frozen=True)
class LoadedConfig:
    """An agent's JSON config as read: its data, its bytes and the ``stat`` taken before the
    read, which :func:`atomic_write` compares to refuse a file that changed meanwhile."""

    data: dict[str, Any]
    raw: bytes | None  # None: the file does not exist
    stat: os.stat_result | None


def load_config(path: Path) -> LoadedConfig:
    """Read and parse an agent's JSON config; any doubt about it is an error, never a rewrite."""
    try:
        st = path.stat()  # before reading: a change after this point is caught at write time
        raw = path.read_bytes()
    except FileNotFoundError:
        return LoadedConfig({}, None, None)
    except OSError as exc:
        raise InstallError(f"{path}: cannot read: {exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InstallError(f"{path}: not UTF-8 ({exc}); left untouched") from exc
    if not text.strip():
        return LoadedConfig({}, raw, st)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstallError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; "
            "fix it by hand, geode will not rewrite it"
        ) from exc
    if not isinstance(data, dict):
        raise InstallError(
            f"{path}: expected a JSON object at the top level, got {type(data).__name__}; left untouched"
        )
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InstallError(
            f'{path}: "hooks" must be an object of event -> list, got {type(hooks).__name__}; left untouched'
        )
    for event, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            raise InstallError(
                f'{path}: "hooks".{json.dumps(event)} must be a list of matcher groups, '
                f"got {type(groups).__name__}; left untouched"
            )
    return LoadedConfig(data, raw, st)


def dump_config(data: dict[str, Any]) -> bytes:
    """Deterministic text (two-space indent, keys in their order, final newline)."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def atomic_write(path: Path, content: bytes, before: os.stat_result | None) -> None:
    """Replace ``path`` with ``content`` atomically, keeping its mode (and owner when allowed).

    The temp file sits in the same folder (``os.replace`` is atomic only within a filesystem),
    is created with ``O_CREAT|O_EXCL`` at the original mode (never briefly world-readable), and
    is fsynced before the rename; the folder is fsynced after it so the rename survives a crash.
    A symlinked settings file (dotfile managers) is written through, not replaced by a file.
    """
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    if before is not None:
        try:
            now = target.stat()
        except FileNotFoundError:
            now = None
        if now is None or (now.st_mtime_ns, now.st_size, now.st_ino) != (
            before.st_mtime_ns,
            before.st_size,
            before.st_ino,
        ):
            raise InstallError(f"{path}: changed while geode was editing it; nothing written, run again")
    mode = (before.st_mode & 0o7777) if before is not None else None
    tmp = target.with_name(f".{target.name}.geode-{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, mode if mode is not None else 0o666)
    except FileExistsError:  # a stale temp from a crashed run with our pid
        os.unlink(tmp)
        fd = os.open(tmp, flags, mode if mode is not None else 0o666)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # the umask may have narrowed it
                try:
                    os.fchown(fd, before.st_uid, before.st_gid)  # type: ignore[union-attr]
                except OSError:
                    pass  # only root can give a file away; same user is the usual case
            view = memoryview(content)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:  # clean up, then re-raise: nothing is caught here
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
