"""``geode serve``: the command-line adapter of the warm search server
(``geode.services.search_server``): its flags, its signals, what it prints once listening.

``geode.cli.recall_cmds.register`` registers it.
"""

from __future__ import annotations

import os
import sys

from geode.services.invocation import print_json, settings_of
from geode.services.search_server import SERVE_LOCK, serve, socket_path


def cmd_serve(args) -> int:
    import signal
    import threading

    settings = settings_of(args)
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
    s.set_defaults(func=cmd_serve)
