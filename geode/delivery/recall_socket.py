"""Where the warm search server's UNIX socket lives, and whether a client may trust it.

Shared by the server (``geode.services.search_server``) and its client
(``geode.delivery.prompt_recall.ask_server``, on the hook's path: standard library only, and
lean: no ``re``, ``json``, ``pathlib``).

Why: the client hands the server the user's prompt (which may hold a pasted token) and puts what
comes back into the agent's context. A socket at a name another local user can compute (the old
``/tmp/geode-<crc32>.sock`` for long homes) can be bound first by that user, who then reads every
prompt and plants notes. So:

- Everything lives in ``GEODE_HOME/run/``, a directory made mode 0700. The socket is
  ``run/recall.sock`` when that path fits ``sun_path``; otherwise the server makes a private
  directory with ``tempfile.mkdtemp`` (mode 0700, an unguessable name, under ``XDG_RUNTIME_DIR``
  when that is a private directory of ours, else the temp folder) and writes the socket's full
  path into ``run/recall.where``. Nothing is ever at a name a stranger can compute and bind.
- Before it sends anything the client checks (``lstat``, never following a link) that the run
  directory and the socket's directory are directories owned by its own uid that nobody else may
  write, that the socket is a socket owned by its uid, and, once connected, that the peer's uid
  (``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS) is its own. A platform where the peer
  cannot be asked gets no warm recall.
- Every request carries the home's token (``run/token``, mode 0600), which the server compares
  with ``hmac.compare_digest``: a process of another user that reaches the socket anyway gets no
  search.

A socket that fails a check is not used: the caller falls back to the cold path, and
``untrusted_reason`` says why (``geode doctor``, ``geode search``)."""

from __future__ import annotations

import os
import stat
import sys

from geode.kernel.errors import ServiceUnavailable

RUN_DIR = "run"
SOCKET = "recall.sock"
WHERE = "recall.where"
TOKEN = "token"
#: the longest socket path used; ``sun_path`` holds 108 bytes on Linux, 104 on macOS, with the NUL
MAX_PATH = 100


class Untrusted(ServiceUnavailable):
    """A socket (or its directory, or its peer) this user cannot trust; the message says why."""


def run_dir(home: str) -> str:
    """``GEODE_HOME/run``: the private directory of the server's socket, its token and its record."""
    return os.path.join(home, RUN_DIR)


def check_private_dir(path: str, what: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(path) from None
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{what} {path} is not a directory (a link or a file)")
    if st.st_uid != os.geteuid():
        raise Untrusted(f"{what} {path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})")
    if st.st_mode & 0o022:
        raise Untrusted(f"{what} {path} may be written by others (mode {stat.S_IMODE(st.st_mode):o})")


def read_private_file(path: str, limit: int = 4096) -> str:
    """A small file of ours that nobody else can read or write; its text, stripped."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
            raise Untrusted(
                f"{path} is not a private file of this user (uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})"
            )
        return os.read(fd, limit).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


def socket_path(home: str) -> str | None:
    """The socket this home's server answers on, or None when none is recorded. No trust checks:
    for messages and for the server; a client uses ``trusted_socket``."""
    direct = os.path.join(run_dir(home), SOCKET)
    if len(direct) < MAX_PATH:
        return direct
    try:
        with open(os.path.join(run_dir(home), WHERE), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def trusted_socket(home: str) -> tuple[str, str] | None:
    """(socket path, token) when this home has a server socket that passes every check before
    connecting; None when there is none. Raises ``Untrusted`` when there is one it must not use."""
    rd = run_dir(home)
    try:
        check_private_dir(rd, "the run directory")
    except FileNotFoundError:
        return None
    direct = os.path.join(rd, SOCKET)
    if len(direct) < MAX_PATH:
        path = direct
    else:
        try:
            path = read_private_file(os.path.join(rd, WHERE))
        except FileNotFoundError:
            return None
        if not path or not os.path.isabs(path) or len(path) >= MAX_PATH + 8:
            raise Untrusted(f"{os.path.join(rd, WHERE)} does not hold a usable socket path")
        try:
            check_private_dir(os.path.dirname(path), "the socket directory")
        except FileNotFoundError:
            return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        raise Untrusted(f"{path} is not a socket")
    if st.st_uid != os.geteuid():
        raise Untrusted(f"the socket {path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})")
    try:
        token = read_private_file(os.path.join(rd, TOKEN))
    except FileNotFoundError:
        raise Untrusted(f"no token at {os.path.join(rd, TOKEN)}: the socket was not made by geode serve") from None
    return path, token


def peer_uid(sock) -> int | None:
    """The uid of the process at the other end of a connected UNIX socket, or None where this
    platform cannot say (then the caller must not trust it)."""
    import _socket

    if hasattr(_socket, "SO_PEERCRED"):  # Linux: struct ucred {pid_t pid; uid_t uid; gid_t gid}
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        return int.from_bytes(raw[4:8], sys.byteorder)
    if hasattr(_socket, "LOCAL_PEERCRED"):  # macOS / BSD: struct xucred {u_int version; uid_t uid; ...}
        raw = sock.getsockopt(0, _socket.LOCAL_PEERCRED, 76)
        return int.from_bytes(raw[4:8], sys.byteorder)
    return None


def check_peer(sock, path: str) -> None:
    """Raise ``Untrusted`` unless the connected peer runs as this user."""
    uid = peer_uid(sock)
    if uid is None:
        raise Untrusted(f"this platform cannot tell who answers on {path}")
    if uid != os.geteuid():
        raise Untrusted(f"the process answering on {path} runs as uid {uid}, not as this user (uid {os.geteuid()})")


def untrusted_reason(home: str) -> str | None:
    """Why this home's socket would not be used (for ``geode doctor``); None when it would be, or
    when there is none. Connects, to ask the peer's credentials, but sends nothing."""
    try:
        found = trusted_socket(home)
    except Untrusted as exc:
        return str(exc)
    except OSError as exc:
        return f"the recall socket of {home} cannot be checked: {exc}"
    if found is None:
        return None
    import _socket

    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(1.0)
        s.connect(found[0])
        check_peer(s, found[0])
    except Untrusted as exc:
        return str(exc)
    except OSError:
        return None  # a stale socket nobody answers on: nothing is sent to anyone
    finally:
        s.close()
    return None
