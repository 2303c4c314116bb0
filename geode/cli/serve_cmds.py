"""``geode serve``: the command-line adapter of the warm search server
(``geode.services.search_server``): its flags, its signals, what it prints once listening.

``geode.cli.recall_cmds.register`` registers it.
"""

from __future__ import annotations

import os
import sys

from geode.services.invocation import print_json, settings_of
from geode.services.search_server import SERVE_LOCK, serve, socket_path


def stop_serve(settings, wait_s: float = 15.0) -> int | None:
    """Stop this home's warm server: its pid (it answers a ping with it), asked to end with
    SIGTERM, waited for until its socket is gone. None when none answers."""
    import signal
    import time

    from geode.delivery.prompt_recall import ask_server

    reply = ask_server(settings.home, {"op": "ping"}, 5.0)
    pid = reply.get("pid") if isinstance(reply, dict) else None
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + wait_s
    while os.path.exists(socket_path(settings) or "") and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def cmd_serve(args) -> int:
    import signal
    import threading

    settings = settings_of(args)
    if args.stop:
        pid = stop_serve(settings)
        if args.json:
            print_json({"stopped": pid})
        else:
            print(f"geode serve: stopped pid {pid}" if pid else f"geode serve: none runs for {settings.home}")
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def ready():
        msg = {"socket": socket_path(settings), "pid": os.getpid()}
        if args.json:
            print_json(msg, compact=True)
        else:
            print(f"geode serve: listening on {msg['socket']} (pid {msg['pid']})")
        sys.stdout.flush()

    if not serve(settings, interval_s=args.interval, ready=ready, stop_event=stop, idle_exit_s=args.idle_exit):
        from geode.services.invocation import CLIError

        raise CLIError(f"a geode serve already runs for {settings.home} (it holds {SERVE_LOCK})")
    return 0


def register(sub, common) -> None:
    """Called by ``geode.cli.recall_cmds.register`` (the module ``geode.cli.main`` loads)."""
    s = sub.add_parser("serve", parents=[common], help="keep the model warm; answer searches on a local socket")
    s.add_argument("--interval", type=float, default=5.0, help="seconds between background refresh/embed passes")
    s.add_argument(
        "--idle-exit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after this many seconds without a request (what a serve started by a search uses)",
    )
    s.add_argument("--stop", action="store_true", help="stop this home's running serve (one a search started, too)")
    s.set_defaults(func=cmd_serve)
