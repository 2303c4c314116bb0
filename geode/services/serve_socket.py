"""The server's half of a socket only its owner can reach: where ``geode serve`` binds
(``place_socket``) and the home's request token (``home_token``). The client's half, the
checks made before a prompt is sent, is ``geode.delivery.recall_socket`` (standard library, on
the hook's path); that module's docstring says why the socket lives where it does.
"""

from __future__ import annotations

import os
from typing import Any


def _private_dir(path: str) -> None:
    """Make ``path`` a directory of ours with mode 0700, or raise naming what is wrong with it."""
    from geode.delivery.recall_socket import Untrusted, check_private_dir

    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        check_private_dir(path, "the run directory")
    except Untrusted as exc:
        raise Untrusted(f"{exc}: geode serve will not put its socket there", hint=f"remove {path}") from None
    os.chmod(path, 0o700)


def _write_private(path: str, text: str) -> None:
    """Write a 0600 file whole (a temporary name, then a rename), so no reader sees half of it."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def home_token(home: str) -> str:
    """This home's request token (``GEODE_HOME/run/token``, mode 0600): kept while it is a private
    file of ours, made anew otherwise (a token others could read is no token)."""
    import secrets

    from geode.delivery import recall_socket

    path = os.path.join(recall_socket.run_dir(home), recall_socket.TOKEN)
    try:
        tok = recall_socket.read_private_file(path)
        if len(tok) >= 32:
            return tok
    except (OSError, recall_socket.Untrusted):
        pass
    tok = secrets.token_hex(32)
    _write_private(path, tok + "\n")
    return tok


def place_socket(home: str) -> tuple[str, Any]:
    """(socket path, cleanup): where this home's server binds, made private first. The socket is
    ``run/recall.sock`` when that path is short enough for ``sun_path``; else a fresh
    ``tempfile.mkdtemp`` directory (mode 0700, a name nobody can compute; under ``XDG_RUNTIME_DIR``
    when that is a private directory of ours) recorded in ``run/recall.where``. A stale one from a
    server that died is reused while it still passes the client's checks."""
    import shutil
    import tempfile

    from geode.delivery import recall_socket

    rd = recall_socket.run_dir(home)
    _private_dir(rd)
    direct = os.path.join(rd, recall_socket.SOCKET)
    if len(direct) < recall_socket.MAX_PATH:
        return direct, lambda: None
    where = os.path.join(rd, recall_socket.WHERE)
    old = recall_socket.socket_path(home)
    if old and len(old) < recall_socket.MAX_PATH:
        try:
            recall_socket.check_private_dir(os.path.dirname(old), "the socket directory")
            folder = os.path.dirname(old)
        except (OSError, recall_socket.Untrusted):
            folder = None
    else:
        folder = None
    if folder is None:
        base = None
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isabs(xdg) and len(xdg) < recall_socket.MAX_PATH - 40:
            try:
                recall_socket.check_private_dir(xdg, "XDG_RUNTIME_DIR")
                base = xdg
            except (OSError, recall_socket.Untrusted):
                base = None
        folder = tempfile.mkdtemp(prefix="geode-", dir=base)
    path = os.path.join(folder, recall_socket.SOCKET)
    if len(path) >= recall_socket.MAX_PATH:
        from geode.kernel.errors import ServiceUnavailable

        raise ServiceUnavailable(
            f"no socket path short enough for this home: {path}", hint="set TMPDIR to a short folder"
        )
    _write_private(where, path + "\n")

    def cleanup() -> None:
        for p in (where,):
            try:
                os.unlink(p)
            except OSError:
                pass
        shutil.rmtree(folder, ignore_errors=True)

    return path, cleanup
