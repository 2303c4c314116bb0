"""``geode web [--host 127.0.0.1] [--port PORT] [--no-open]``: serve the page.

Registered by ``geode.program.main`` beside the other surfaces' command modules; this module
imports nothing at load time (every ``geode`` command loads it), and Starlette, uvicorn and
Jinja2 only when the command runs.

It binds the socket first (so the printed URL names the port really bound, also for
``--port 0``), prints ``http://HOST:PORT/?token=TOKEN`` with a fresh random token on stdout,
opens a browser unless ``--no-open``, and serves until interrupted. Binding anywhere but
loopback needs ``--allow-remote`` and prints a warning: the token is then all that stands
between the network and the approval queue, over plain HTTP.
"""

from __future__ import annotations

import sys

DEFAULT_PORT = 8765
#: ``geode mcp --http``'s default (geode.mcp.loopback.DEFAULT_PORT): never taken by the page's search
MCP_PORT = 8766
#: With the default port busy, the next ones are tried (an explicit ``--port`` is not moved).
PORT_TRIES = 20


def register(sub, common) -> None:
    s = sub.add_parser("web", parents=[common], help="the approval queue, the store and health in a local browser page")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument(
        "--port", type=int, default=None, help=f"port (default {DEFAULT_PORT}, or the next free one; 0: any free port)"
    )
    s.add_argument("--no-open", action="store_true", help="print the URL, do not open a browser")
    s.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow binding a non-loopback address (the token alone then guards the queue; plain HTTP)",
    )
    s.add_argument("--who", help="who decides (default: [web] who in geode.toml, else the OS user)")
    s.set_defaults(func=cmd_web)


def _bind(host: str, port: int | None):
    """A listening socket on ``host``; without ``port``, 8765 or the next free one."""
    import errno
    import socket

    from geode.services.invocation import CLIError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    tries = [port] if port is not None else [p for p in range(DEFAULT_PORT, DEFAULT_PORT + PORT_TRIES) if p != MCP_PORT]
    tries += [0] if port is None else []
    last: OSError | None = None
    for p in tries:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), p))
        except OSError as exc:
            sock.close()
            last = exc
            if exc.errno in (errno.EADDRINUSE, errno.EACCES) and port is None:
                continue
            if exc.errno == errno.EADDRINUSE:
                raise CLIError(
                    f"--port {p}: port {p} on {host} is taken (another geode web, or geode mcp --http?): "
                    "choose another with --port, or leave --port out to take the next free one"
                ) from exc
            raise CLIError(f"cannot bind {host}:{p}: {exc.strerror or exc}") from exc
        sock.listen(128)
        sock.set_inheritable(True)
        return sock
    raise CLIError(f"cannot bind {host}: {last}")


def url_for(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1"
    return f"http://{shown}:{port}/?token={token}"


def cmd_web(args) -> int:
    from geode.services.invocation import CLIError, settings_of
    from geode.services.loopback_guard import is_loopback
    from geode.web.queue import who_of

    host = args.host.strip()
    wildcard = host in ("0.0.0.0", "::")
    if not is_loopback(host) and not args.allow_remote:
        raise CLIError(
            f"--host {host} is not a loopback address: anyone who can reach it could try the page. "
            "Pass --allow-remote as well if that is what you want",
            2,
        )
    settings = settings_of(args)
    sock = _bind(host, args.port)
    port = sock.getsockname()[1]
    import secrets

    token = secrets.token_urlsafe(32)
    import uvicorn

    from geode.web.app import create_app

    app = create_app(
        settings, token=token, bound=host if not wildcard else host, port=port, who=who_of(settings, args.who)
    )
    url = url_for(host, port, token)
    if not is_loopback(host):
        print(
            f"warning: serving on {host}:{port}, reachable from other machines, over plain HTTP; "
            "the token is all that guards the approval queue",
            file=sys.stderr,
        )
    print(f"geode web: serving {', '.join(settings.domains)} on {url}", flush=True)
    if not args.no_open:
        import webbrowser

        try:
            webbrowser.open(url)
        except (OSError, webbrowser.Error) as exc:  # no browser here: the printed URL is enough
            print(f"geode web: could not open a browser ({exc}); open the URL above", file=sys.stderr)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", server_header=False, date_header=False
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0
