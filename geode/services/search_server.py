"""The warm search server (``geode serve``): the model and Chroma kept loaded, search requests
answered on a local UNIX socket (the hook's prompt-time recall and ``geode search`` ask it
first, through ``geode.delivery.prompt_recall.ask_server``), and the index refreshed and pending
notes embedded in the background.

A service below the surfaces: ``geode serve`` (``geode.cli.serve_cmds``) is its command-line
adapter and ``geode search`` starts one on demand. A long-running process with its own loop and
its own error edges (``tests/test_errors.py`` names them). Heavy imports happen inside the
functions.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def socket_path(settings) -> str | None:
    """The UNIX socket this home's server answers on (the one its client asks), once placed."""
    from geode.delivery.recall_socket import socket_path as home_socket

    return home_socket(settings.home)


#: ``GEODE_HOME/serve.lock``: held by the one ``geode serve`` of a home for as long as it runs
#: (``flock``, released when it dies), so two never fight over the socket and a search knows
#: whether one is already starting.
SERVE_LOCK = "serve.lock"
#: where a serve started on demand writes what it says (it has no terminal)
SERVE_LOG = "serve.log"


def _serve_lock(settings):
    from geode.kernel.locks import FileLock

    return FileLock(os.path.join(settings.home, SERVE_LOCK), record_pid=True)


def serve_running(settings) -> bool:
    """True when some process holds this home's serve lock (running, or warming up)."""
    lk = _serve_lock(settings)
    if lk.acquire(0):
        lk.release()
        return False
    return True


def start_on_demand(settings) -> int | None:
    """Start ``geode serve`` for this home, detached, unless one runs or is starting, or
    ``[recall] serve_idle_s`` is 0. It answers on the home's UNIX socket (local only) once the
    model is loaded and Chroma open, and exits after ``serve_idle_s`` seconds without a request
    or when the home folder goes away. Returns the new process id, or None.

    Why: a cold ``geode search`` pays for interpreter start and imports on every call; the
    search that finds no server pays once more for starting one, and the next search is
    answered warm (about 0.1 s)."""
    import subprocess

    idle = int(settings.recall.serve_idle_s or 0)
    if idle <= 0 or not os.path.isdir(settings.home) or serve_running(settings):
        return None
    args = [sys.executable, "-m", "geode.cli", "serve", "--home", settings.home, "--idle-exit", str(idle)]
    if settings.one_off_store:
        args += ["--store", next(iter(settings.domains.values()))]
    try:
        with open(os.path.join(settings.home, SERVE_LOG), "ab") as log:
            p = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # not ended with the terminal or the search's process group
                close_fds=True,
            )
    except OSError:
        return None  # the search still answers; the next one tries again
    return p.pid


def _config_stamp(home: str) -> tuple | None:
    """What says ``GEODE_HOME/geode.toml`` changed: its inode, size and mtime; None when absent."""
    try:
        st = os.stat(os.path.join(home, "geode.toml"))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class LiveSettings:
    """The settings a serve searches with: its start-up ones, re-read when ``geode.toml`` changes.

    Why: the ranking's settings (``[recall] blend``, ``spread_weight``, ...) come from that file
    alone, and a cold ``geode search`` reads it on every call; a serve that kept its start-up
    copy answered every warm search (the CLI, the prompt hook) with the old ranking for as long
    as it ran (``serve_idle_s``, 30 minutes by default) after a person edited the file. One stat
    per request. A file that no longer loads, or that names other domains or another database
    (which needs a new index and vector store), leaves the running ones in place: the CLI then
    sees domains other than its own and searches cold, and ``geode serve --stop`` says how to
    start afresh."""

    def __init__(self, settings):
        self.settings = settings
        self.stamp = _config_stamp(settings.home)

    def current(self):
        stamp = _config_stamp(self.settings.home)
        if stamp == self.stamp:
            return self.settings
        self.stamp = stamp
        from geode.kernel.config import ConfigError, load_settings

        old = self.settings
        try:
            new = load_settings(store=next(iter(old.domains.values())) if old.one_off_store else None, home=old.home)
        except (ConfigError, OSError, ValueError) as exc:  # a half-written or invalid file: answer as before
            print(f"geode serve: geode.toml changed but does not load, kept the old settings: {exc}", file=sys.stderr)
            return old
        if new.domains != old.domains or new.db_url != old.db_url:
            print("geode serve: geode.toml names other domains or another database: restart the serve", file=sys.stderr)
            return old
        self.settings = new
        return new


def serve(
    settings,
    interval_s: float = 5.0,
    full_every_s: float = 120.0,
    ready=None,
    stop_event=None,
    idle_exit_s: float | None = None,
) -> bool:
    """Keep the model and Chroma warm and answer search requests on a UNIX socket; refresh the text
    index and embed pending notes in the background (as the one writer while the lock is free).

    One per home (``serve.lock``): returns False at once when another holds it, True after a
    run. ``idle_exit_s``: stop after that many seconds without a request (a serve started on
    demand); it also stops when the home folder is gone."""
    home_lock = _serve_lock(settings)
    if not home_lock.acquire(0):
        return False
    try:
        import hmac
        import logging
        import socketserver
        import threading

        from geode.kernel.errors import GeodeError
        from geode.recall import vectors
        from geode.recall.recall_index import RecallIndex
        from geode.recall.search import forget_term_stats, index_for, search, semantic_for
        from geode.services.serve_socket import home_token, place_socket

        path, cleanup = place_socket(settings.home)
        token = home_token(settings.home).encode("utf-8")
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        last_request = [time.monotonic()]
        semantic_for(settings).embedder.describe()  # load the model and open Chroma now, not on the first prompt
        try:  # one search warms the SQL side too (statement caches, FTS pages)
            search(settings, "warm up", limit=1, refresh=True, chain=False)
        except Exception as exc:  # noqa: BLE001 - serve loop entry: reported, the server still starts
            print(f"geode serve: warm-up search failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        lock = threading.Lock()
        stop = stop_event or threading.Event()
        live = LiveSettings(settings)

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                last_request[0] = time.monotonic()
                reply: dict[str, Any]
                try:
                    line = self.rfile.readline(1_000_000)
                    req = json.loads(line or b"{}")
                    if not isinstance(req, dict) or not hmac.compare_digest(
                        str(req.get("token") or "").encode("utf-8"), token
                    ):
                        reply = {"error": "refused: no valid token for this home (GEODE_HOME/run/token)"}
                        logging.getLogger(__name__).warning("geode serve: refused a request without this home's token")
                    elif req.get("op") == "ping":
                        reply = {"ok": True, "pid": os.getpid()}
                    else:
                        with lock:
                            cur = live.current()  # geode.toml as a cold search reads it now
                            res = search(
                                cur,
                                str(req.get("q") or ""),
                                limit=int(req.get("limit") or 10),
                                domain=req.get("domain"),
                                type=req.get("type"),
                                status=req.get("status"),
                                tags=req.get("tags"),
                                where=req.get("where"),
                                after=req.get("after"),
                                as_of=req.get("as_of"),
                                mode=req.get("mode") or "hybrid",
                                blend=req.get("blend") or None,  # None: the configured [recall] blend, as cold
                                refresh=bool(req.get("refresh")),
                                chain=not req.get("prompt"),
                            )
                        reply = {**dict(res), "domains": [list(x) for x in sorted(cur.domains.items())]}
                except Exception as exc:  # serve loop entry: a bad request gets its error, never takes the server down
                    reply = {"error": str(exc)}
                    if not isinstance(exc, (GeodeError, ValueError)):  # not the request's fault: keep the traceback
                        logging.getLogger(__name__).exception("geode serve: request failed")
                self.wfile.write(json.dumps(reply, ensure_ascii=False, default=str).encode("utf-8") + b"\n")

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True

        old_umask = os.umask(0o177)  # the socket is 0600 from its first moment, not after a chmod
        try:
            server = Server(path, Handler)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)

        def background():
            # Searches are not held up by this thread: SQLite (WAL) and PostgreSQL let readers run
            # while it writes, and the model has its own lock. The first full pass waits a period.
            idx = RecallIndex(settings)
            last_full = time.time()
            while not stop.is_set():
                try:
                    if time.time() - last_full > full_every_s:
                        r = idx.refresh()
                        last_full = time.time()
                    else:
                        r = idx.quick_refresh()
                    e = vectors.embed_pending(settings, limit=256)
                    if r["added"] or r["changed"] or r["removed"] or e.get("embedded"):
                        forget_term_stats(index_for(settings))  # the searches' cached counts are stale
                except Exception as exc:  # noqa: BLE001 - serve loop entry: reported; the next pass retries
                    print(f"geode serve: background pass failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                stop.wait(interval_s)

        t = threading.Thread(target=background, daemon=True)
        t.start()
        if ready is not None:
            ready()
        try:
            th = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
            th.start()
            while not stop.is_set():
                stop.wait(0.5)
                if idle_exit_s and time.monotonic() - last_request[0] > idle_exit_s:
                    stop.set()
                if not os.path.isdir(settings.home):  # a temporary home removed under us
                    stop.set()
        finally:
            stop.set()
            server.shutdown()
            server.server_close()
            try:
                os.unlink(path)
            except OSError:
                pass
            cleanup()
    finally:
        home_lock.release()
    return True
