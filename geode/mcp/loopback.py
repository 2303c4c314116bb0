"""``geode mcp --http``: the streamable-HTTP transport on loopback, behind the page's guard.

Apart from the tools because it is the transport, not the recall: the token (``$GEODE_MCP_TOKEN``
or ``GEODE_HOME/mcp-token``), the Host and origin checks (:class:`Guard`, the page's rule for an
MCP client) and the uvicorn server. stdio needs none of it.
"""

import os
from typing import Any

from geode.mcp.inputs import ToolInputError
from geode.services.loopback_guard import Guard as LoopbackGuard
from geode.services.request_bounds import RequestBounds

#: the most bytes one HTTP message may hold: a ``write_note`` body at its limit (200,000
#: characters), escaped as JSON, fits; anything larger is refused before it is parsed
MAX_BODY_BYTES = 2 * 1024 * 1024

LOOPBACK = ("127.0.0.1", "::1", "localhost")
TOKEN_ENV = "GEODE_MCP_TOKEN"


def token_path(settings) -> str:
    return os.path.join(settings.home, "mcp-token")


def load_token(settings) -> str:
    """``GEODE_MCP_TOKEN``, else ``GEODE_HOME/mcp-token`` (created 0600 with a random token)."""
    import secrets

    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    path = token_path(settings)
    try:
        with open(path, encoding="utf-8") as fh:
            tok = fh.read().strip()
        if tok:
            return tok
    except FileNotFoundError:
        pass
    os.makedirs(settings.home, exist_ok=True)
    tok = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(tok + "\n")
    return tok


def allowed_hosts(port: int) -> list[str]:
    """The Host header values the SDK's own DNS-rebinding check accepts (a second line behind
    :class:`Guard`, which applies the page's rule)."""
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]


class Guard(LoopbackGuard):
    """The page's guard (``geode.services.loopback_guard.Guard``), for an MCP client instead of a browser.

    The same rules as every local server of this project, by the same code: the ``Host`` must
    be the bound address or ``localhost`` (with the bound port, or none), else 403 before
    anything else (DNS rebinding); every request carries the token, compared in constant time,
    else 401. What differs, because the client is an agent and not a browser: the token comes
    only as ``Authorization: Bearer`` (no cookie, no ``?token=``, so no CSRF token either); the
    methods are the streamable-HTTP transport's (POST a message, GET the event stream, DELETE
    the session); any request that says it comes from another origin (``Origin``,
    ``Sec-Fetch-Site: cross-site``) is refused, whatever its method. The token outlives a
    restart (``GEODE_HOME/mcp-token`` or ``$GEODE_MCP_TOKEN``), unlike the page's: an agent's
    configuration holds it.
    """

    METHODS = ("GET", "POST", "DELETE")
    #: named in the 401's message (set by :func:`http_app`)
    token_file = "GEODE_HOME/mcp-token"
    from_env = False

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":
            return await self._deny(send, 403, "only HTTP")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not self.host_ok(headers.get("host")):
            return await self._deny(send, 403, "this server answers only to its own address (Host refused)")
        origin = headers.get("origin")
        if origin is not None and not self.origin_ok(origin):
            return await self._deny(send, 403, "cross-origin request refused")
        if headers.get("sec-fetch-site", "none") not in ("none", "same-origin"):
            return await self._deny(send, 403, "cross-site request refused")
        auth = headers.get("authorization", "")
        sent = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if not self._token_ok(sent):
            # WWW-Authenticate: an MCP client that gets a bare 401 says "Failed to connect" or
            # starts an OAuth flow; this names the scheme and, in the body, the file to read
            where = f"the token in {self.token_file}" + (
                f" (or ${TOKEN_ENV}, set for this server)" if self.from_env else ""
            )
            challenge = 'Bearer realm="geode mcp"' + (', error="invalid_token"' if sent else "")
            return await self._deny(
                send,
                401,
                f"{'a wrong' if sent else 'no'} token: send Authorization: Bearer TOKEN, {where}",
                [(b"www-authenticate", challenge.encode())],
            )
        if scope["method"].upper() not in self.METHODS:
            return await self._deny(send, 405, f"{scope['method']} is not used by the MCP transport")
        return await self.app(scope, receive, send)


def http_app(settings, server, port: int, token: str, host: str = "127.0.0.1"):
    """The streamable-HTTP app at ``/mcp`` behind :class:`Guard` (and the SDK's own Host check)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = allowed_hosts(port)
    sec = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts]
    )
    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=sec, host=host)
    guard = Guard(app, token, host, port)
    guard.token_file = token_path(settings)
    guard.from_env = bool(os.environ.get(TOKEN_ENV, "").strip())
    return RequestBounds(guard, max_body=MAX_BODY_BYTES)


def run_http(settings, server, port: int, host: str = "127.0.0.1", ready=None) -> None:
    import uvicorn

    if host not in LOOPBACK:
        raise ToolInputError(f"--host {host}: geode mcp listens on loopback only ({', '.join(LOOPBACK)})")
    token = load_token(settings)
    bind = "::1" if host == "::1" else "127.0.0.1"
    sock = bind_port(bind, port)  # before "serving": a taken port is said as such, and nothing is served
    app = http_app(settings, server, port, token, bind)
    config = uvicorn.Config(
        app, host=bind, port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=STOP_GRACE_S
    )
    if ready is not None:
        ready()
    try:
        _PromptServer(config).run(sockets=[sock])
    finally:
        sock.close()


#: ``geode mcp --http`` without a port; ``geode web``'s is 8765, so both run side by side
DEFAULT_PORT = 8766


def bind_port(host: str, port: int):
    """A listening socket on ``host:port``, or a ToolInputError that says the port is taken."""
    import errno
    import socket

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ToolInputError(
                f"--http {port}: port {port} on {host} is taken (another geode mcp --http, or geode web?): "
                "choose another with --http PORT"
            ) from exc
        raise ToolInputError(f"--http {port}: cannot bind {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    return sock


#: seconds a SIGTERM (or SIGINT) waits for the calls in flight before the server ends anyway
STOP_GRACE_S = 2


class _PromptServer:
    """uvicorn's server, ended within ``STOP_GRACE_S`` (and a second) of a SIGTERM.

    Why: uvicorn's graceful shutdown waits for every request in flight, and a tool call runs on
    a worker thread that cannot be cancelled: a call stuck for minutes kept the server up, and
    its port taken, long after it was told to stop (issue 22). The signal starts a timer; when
    the graceful path has not ended the process by then, it ends with 128 + the signal's number,
    as a process killed by it would."""

    def __new__(cls, config) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            def handle_exit(self, sig, frame):
                _exit_after(STOP_GRACE_S + 1.0, 128 + int(sig))
                super().handle_exit(sig, frame)

        return Server(config)


def _exit_after(seconds: float, code: int) -> None:
    import threading

    t = threading.Timer(seconds, lambda: os._exit(code))
    t.daemon = True
    t.start()
