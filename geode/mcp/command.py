"""``geode mcp``: the recall tools over the Model Context Protocol (stdio, or HTTP on loopback).

Registered by ``geode.program.main`` (and run alone by ``geode/mcp/main.py``); the SDK and the
recall stack are imported inside the command only, so other commands stay quick. The server itself: ``geode/mcp/server.py``
(and the modules it names).
"""

from __future__ import annotations

import json
import sys


def cmd_mcp(args) -> int:
    from geode.services.invocation import CLIError, settings_of

    settings = settings_of(args)
    try:
        from geode.mcp import server as ms
        from geode.mcp.inputs import ToolInputError
        from geode.mcp.loopback import TOKEN_ENV, run_http, token_path
        from geode.mcp.routing import domain_lines
        from geode.mcp.tools import Recall
    except ImportError as exc:  # the SDK missing from this interpreter: say which one
        raise CLIError(
            f"the MCP SDK cannot be imported by {sys.executable} ({exc}); "
            f"install it with `{sys.executable} -m pip install mcp`"
        ) from exc
    if args.check:
        import anyio

        server = ms.build_server(settings)
        tools = anyio.run(server.list_tools)
        print(
            json.dumps(
                {
                    "ok": True,
                    "server": ms.SERVER_NAME,
                    "python": sys.executable,
                    "tools": [t.name for t in tools],
                    "domains": domain_lines(settings),
                },
                ensure_ascii=False,
            )
        )
        return 0
    recall = Recall(settings, background=not args.no_background)
    # stdio: the warm-up starts once the transport holds stdin/stdout (the server's lifespan);
    # HTTP has no stdout to protect and serves many sessions, so it warms up once, now.
    server = ms.build_server(settings, recall, warm=not args.no_warm and args.http is None)
    if args.http is not None:
        if not args.no_warm:
            recall.start_warm()

        def ready():
            print(
                f"geode mcp: http://{'[::1]' if args.host == '::1' else '127.0.0.1'}:{args.http}/mcp "
                f"(token: ${TOKEN_ENV} or {token_path(settings)})",
                file=sys.stderr,
                flush=True,
            )

        try:
            run_http(settings, server, args.http, host=args.host, ready=ready)
        except ToolInputError as exc:
            raise CLIError(str(exc), 2) from exc
        return 0
    import signal

    # stdio: SIGTERM ends the process at once, whatever a tool call is doing (an ignored SIGTERM
    # inherited from the agent that started it would keep a stuck server alive)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    server.run("stdio")
    return 0


def register(sub, common) -> None:
    import argparse

    s = sub.add_parser(
        "mcp", parents=[common], help="the recall tools for agents over MCP (stdio; --http [PORT] for loopback HTTP)"
    )
    s.add_argument(
        "--http",
        type=int,
        nargs="?",
        const=8766,  # geode.mcp.loopback.DEFAULT_PORT (not imported: every geode command loads this module)
        metavar="PORT",
        help="streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio (PORT: default 8766; geode web's is 8765); "
        "a bearer token from $GEODE_MCP_TOKEN or GEODE_HOME/mcp-token is required",
    )
    s.add_argument(
        "--host",
        default="127.0.0.1",
        choices=["127.0.0.1", "::1", "localhost"],
        help="loopback address to bind with --http",
    )
    s.add_argument(
        "--check",
        action="store_true",
        help="build the server, list its tools as JSON and exit "
        "(what `geode hooks install` runs before registering it)",
    )
    s.add_argument("--no-background", action="store_true", help="never start the background embedder")
    s.add_argument("--no-warm", action="store_true", help=argparse.SUPPRESS)
    s.set_defaults(func=cmd_mcp)
