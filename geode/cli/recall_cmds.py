"""Recall commands: search, context, read, recent, reindex, status, serve. Each takes ``--json``.

Loaded by ``geode/cli/main.py`` (EXTENSIONS). Heavy imports (SQLAlchemy, numpy, Chroma, the model)
happen inside the command functions, so other commands stay quick. JSON shapes: docs/RECALL.md.
"""

from __future__ import annotations

import json
import os
import sys
import time

# standard library only: the flags stay quick
from geode.delivery.dates import argparse_date


def _settings(args):
    from geode.cli.common import settings_of as cli_settings

    return cli_settings(args)


def _dump(obj, compact: bool = False) -> None:
    if compact:
        print(json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":")))
    else:
        print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


class Progress:
    """A progress bar on stderr (redrawn in place on a terminal, every 10% otherwise)."""

    def __init__(self, label: str, quiet: bool = False):
        self.label = label
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last = -1
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or total <= 0:
            return
        pct = int(100 * done / total)
        if not self.tty and pct // 10 == self.last // 10 and done != total:
            return
        if self.tty and pct == self.last and done != total:
            return
        if done >= total and self.last == 100 and getattr(self, "_ended", False):
            return  # the end was drawn already
        self._ended = done >= total
        self.last = pct
        bar = "#" * (pct // 4) + "-" * (25 - pct // 4)
        rate = done / max(time.perf_counter() - self.t0, 1e-9)
        msg = f"{self.label:<10} [{bar}] {done}/{total} ({rate:.0f}/s)"
        if self.tty:
            sys.stderr.write("\r" + msg + ("\n" if done >= total else ""))
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()


# -- search -----------------------------------------------------------------------------------
_OPS = (">=", "<=", "!=", ">", "<", "~", "=")
_OPNAME = {">=": "$gte", "<=": "$lte", ">": "$gt", "<": "$lt", "!=": "$ne", "~": "$contains"}


def _value(s: str):
    s = s.strip()
    if s.startswith("[") and s.endswith("]"):
        return [_value(x) for x in s[1:-1].split(",") if x.strip()]
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s.strip("\"'")


def parse_where(items: list[str], filter_json: str | None) -> dict:
    """``--where key=value`` (a list value ``[a,b]`` means any of them), ``key>=v``, ``key~v``
    (contains), and ``--filter '{"key": {"$contains_any": [...]}}'`` merged into one table."""
    FilterError = ValueError  # noqa: N806 - no import of geode.recall.search here: this runs before the fast path

    where: dict = {}
    if filter_json:
        try:
            data = json.loads(filter_json)
        except json.JSONDecodeError as exc:
            raise FilterError(f"--filter is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise FilterError("--filter must be a JSON object")
        where.update(data)
    for item in items or []:
        for op in _OPS:
            if op in item:
                key, val = item.split(op, 1)
                key = key.strip()
                if not key:
                    raise FilterError(f"--where {item!r}: no key")
                v = _value(val)
                if op == "=":
                    spec = {"$in": v} if isinstance(v, list) else v
                else:
                    spec = {_OPNAME[op]: v}
                prev = where.get(key)
                if isinstance(prev, dict) and isinstance(spec, dict):
                    prev.update(spec)
                else:
                    where[key] = spec
                break
        else:
            raise FilterError(f"--where {item!r}: expected KEY=VALUE, KEY>=VALUE, KEY~VALUE, ...")
    return where


def _search_kwargs(args) -> dict:
    return dict(limit=args.limit, domain=args.domain or None, type=args.type or None, status=args.status or None,
                tags=args.tag or None, where=parse_where(args.where, args.filter) or None, after=args.after,
                as_of=args.as_of, mode=args.mode, blend=args.blend)


def _print_hits(res: dict) -> None:
    for h in res["results"]:
        loc = f"{h['path']}:{h['line']}" if h.get("line") else h["path"]
        status = f" [{h['status']}]" if h.get("status") else ""
        print(f"{h['score']:.3f}  {h['title']}{status}  {h['address']}  ({h['domain']}: {loc})")
        if h.get("snippet"):
            print(f"       {h['snippet']}")
        if h.get("superseded_by"):
            print(f"       superseded by {', '.join(h['superseded_by'])}")
        if h.get("supersedes"):
            print(f"       supersedes {', '.join(h['supersedes'])}")
    extra = f"; {res['notice']}" if res.get("notice") else ""
    print(f"({len(res['results'])} of {res['total']}, mode {res['mode']}{extra})", file=sys.stderr)


def _via_server(settings, query: str, kw: dict) -> dict | None:
    """The search done by a warm ``geode serve`` (model loaded, Chroma open), or None."""
    from geode.delivery.prompt_recall import _ask_server

    req = {"op": "search", "q": query, "refresh": True, **kw}
    reply = _ask_server(settings.home, req, 30.0)
    if reply is None or "results" not in reply:
        return None
    return reply


def _log_search(settings, query: str | None, res: dict) -> None:
    """One ``searched`` ledger row per search with query text (the Gardener reads them); a
    ``--queries`` evaluation run is not usage and writes none."""
    if not query or not res.get("results"):
        return
    from geode.delivery.search_log import record_search

    session = os.environ.get("GEODE_SESSION") or os.environ.get("CLAUDE_SESSION_ID") or f"cli-{os.getpid()}"
    record_search(settings, query, res["results"], session)


def cmd_search(args) -> int:
    from geode.cli.common import CLIError

    settings = _settings(args)
    if not args.queries and not args.no_server and args.mode == "hybrid" and args.query is not None:
        from geode.delivery.prompt_recall import socket_path

        if os.path.exists(socket_path(settings.home)):
            try:
                kw = _search_kwargs(args)
            except ValueError as exc:
                raise CLIError(str(exc), 2) from exc
            res = _via_server(settings, args.query, kw)
            if res is not None and res.get("domains") == [list(x) for x in sorted(settings.domains.items())]:
                res.pop("domains", None)
                res["via"] = "serve"
                _log_search(settings, args.query, res)
                if args.json:
                    _dump(res)
                else:
                    _print_hits(res)
                return 0
    from geode.recall.search import FilterError, search

    try:
        kw = _search_kwargs(args)
        if args.queries:
            with open(args.queries, encoding="utf-8") as fh:
                lines = [ln.rstrip("\n") for ln in fh]
            first = True
            for q in lines:
                if not q.strip():
                    continue
                res = search(settings, q, refresh=first and not args.no_refresh, **kw)
                first = False
                if args.json:
                    _dump(res, compact=True)
                else:
                    print(f"== {q}")
                    _print_hits(res)
            return 0
        if args.query is None and not any([args.domain, args.type, args.status, args.tag, args.where, args.filter,
                                           args.after, args.as_of]):
            raise CLIError("give a query, a filter, or --queries FILE", 2)
        res = search(settings, args.query or "", refresh=not args.no_refresh, background=not args.no_background, **kw)
    except (FilterError, ValueError, OSError) as exc:
        raise CLIError(str(exc), 2) from exc
    _log_search(settings, args.query, res)
    if args.json:
        _dump(res)
    else:
        _print_hits(res)
    return 0


def cmd_context(args) -> int:
    from geode.recall.context import NotFound, build_context

    from geode.cli.common import CLIError

    settings = _settings(args)
    try:
        res = build_context(settings, args.address, depth=args.depth, max_related=args.max_related)
    except (NotFound, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    if args.json:
        _dump(res)
        return 0
    print(f"neighbourhood of {', '.join(res['anchors'][:5])}{' …' if len(res['anchors']) > 5 else ''} "
          f"({res['total']} within {res['depth']} hops, top {len(res['related'])})")
    for r in res["related"]:
        arrow = "->" if r["direction"] == "out" else "<-"
        print(f"{r['score']:.3f}  {r['title']}  {r['address']}  {arrow} {r['relation']} (hops {r['hops']}, paths {r['paths']})")
    return 0


def cmd_read(args) -> int:
    from geode.recall.context import NotFound, read_note

    from geode.cli.common import CLIError

    settings = _settings(args)
    try:
        res = read_note(settings, args.address)
    except (NotFound, OSError) as exc:
        raise CLIError(str(exc)) from exc
    from geode.delivery.search_log import record_read

    session = os.environ.get("GEODE_SESSION") or os.environ.get("CLAUDE_SESSION_ID") or f"cli-{os.getpid()}"
    record_read(settings, res["domain"], res["path"], res["address"], session, via="cli")  # use, for the Cleaner
    if args.json:
        _dump(res)
        return 0
    print(res["content"], end="" if res["content"].endswith("\n") else "\n")
    print("\n-- links", file=sys.stderr)
    for lk in res["links"]:
        state = f"-> {lk['address']}" if lk["resolved"] else "(unresolved)"
        print(f"  line {lk['line']}: {lk['relation']} {lk['target']} {state}", file=sys.stderr)
    b = res["backlinks"]
    print(f"-- {b['count']} backlink(s) {b['by_relation']}", file=sys.stderr)
    if res["next"]:
        print(f"-- next: {res['next']['command']}", file=sys.stderr)
    return 0


def cmd_recent(args) -> int:
    from geode.recall.context import recent_activity

    from geode.cli.common import CLIError

    settings = _settings(args)
    try:
        res = recent_activity(settings, args.period, domain=args.domain or None, limit=args.limit)
    except ValueError as exc:
        raise CLIError(str(exc), 2) from exc
    if args.json:
        _dump(res)
        return 0
    print(f"changed in the last {res['period']} (since {res['since']}): {res['total']} note(s) {res['by_domain']}")
    for r in res["results"]:
        print(f"{r['date'][:16]}  {r['domain']:<10} {r['title']}  {r['address']}")
    return 0


# -- reindex ----------------------------------------------------------------------------------
def cmd_reindex(args) -> int:
    from geode.recall import vectors
    from geode.delivery.index import Index
    from geode.recall.recall_index import RecallIndex

    settings = _settings(args)
    out: dict = {}
    t = time.perf_counter()
    idx_b = Index(settings, busy_ms=10000)
    try:
        counts = idx_b.build()
        counts.update(idx_b.counts())
        counts["seconds"] = round(time.perf_counter() - t, 3)
    finally:
        idx_b.close()
    out["bindings"] = counts
    quiet = args.json and not sys.stderr.isatty()
    idx = RecallIndex(settings)
    t = time.perf_counter()
    rc = idx.refresh(full=args.full or args.wipe, progress=Progress("text", quiet), force=args.wipe)
    problems = rc.pop("problems")
    rc["problems"] = len(problems)
    out["recall"] = rc
    if args.no_wait:
        started = vectors.spawn_background_embedder(settings)
        from geode.recall.embed import model_spec

        out["vectors"] = {"left_to_worker": True, "background_started": started, "model_spec": model_spec(settings)}
    elif args.wipe:
        out["vectors"] = vectors.rebuild(settings, progress=Progress("vectors", quiet))
    else:
        r = vectors.embed_pending(settings, progress=Progress("vectors", quiet), wait_s=600.0)
        if args.full and not r.get("locked"):
            r["pruned"] = vectors.prune(settings)
        out["vectors"] = r
    if args.json:
        _dump(out)
        return 0
    b, r, v = out["bindings"], out["recall"], out["vectors"]
    print(f"binding index: {b['crystals']} crystals in {b['files']} note files ({b['seconds']} s)")
    print(f"recall index:  {r['files']} files, {r['added']} added, {r['changed']} changed, {r['removed']} removed, "
          f"{r['unchanged']} unchanged, {r['problems']} skipped ({r['seconds']} s)")
    if v.get("left_to_worker"):
        print("vectors:       left to the background embedder (--no-wait)")
    elif v.get("locked"):
        print("vectors:       another process holds the writer lock; it embeds what is pending")
    else:
        print(f"vectors:       {v['embedded']} embedded with {v.get('model')} ({v.get('seconds')} s)")
    return 0


# -- status ------------------------------------------------------------------------------------
def recall_status(settings) -> dict:
    """Notes, embedded and pending, model and device, index age against the files, what is out of sync."""
    from geode.recall import vectors
    from geode.recall.embed import get_embedder, model_spec
    from geode.recall.recall_index import RecallIndex, notes_t
    from geode.delivery.store import iter_note_paths
    from sqlalchemy import select

    idx = RecallIndex(settings)
    emb = get_embedder(settings)
    counts = idx.counts(emb.model_id)
    refreshed = idx.meta("refreshed_at")
    with idx.reader.connect() as conn:
        known = {(d, p): (m, s) for d, p, m, s in conn.execute(select(
            notes_t.c.domain, notes_t.c.path, notes_t.c.mtime_ns, notes_t.c.size)).all()}
    new, changed, seen = [], [], set()
    newest_file = 0
    for domain, root in settings.domain_roots():
        if not os.path.isdir(root):
            continue
        for rel in iter_note_paths(root):
            try:
                st = os.stat(os.path.join(root, rel))
            except OSError:
                continue
            newest_file = max(newest_file, st.st_mtime_ns)
            k = (domain, rel)
            seen.add(k)
            if k not in known:
                new.append(f"{domain}:{rel}")
            elif known[k] != (st.st_mtime_ns, st.st_size):
                changed.append(f"{domain}:{rel}")
    removed = [f"{d}:{p}" for (d, p) in known if d in settings.domains and (d, p) not in seen]
    vs = vectors.VectorStore(settings, emb.model_id, emb.dim)
    vcount = vs.count()
    now = time.time()
    age = round(now - float(refreshed), 1) if refreshed else None
    behind = round(max(0.0, newest_file / 1e9 - float(refreshed)), 1) if refreshed and newest_file else None
    out_of_sync = {"files_not_indexed": len(new), "files_changed": len(changed), "indexed_files_gone": len(removed),
                   "examples": (new + changed + removed)[:10], "notes_pending_vectors": counts["pending"],
                   "vectors_in_chroma": vcount, "vectors_expected": counts["embedded"],
                   "other_models": {m: n for m, n in counts["by_model"].items() if m != emb.model_id}}
    in_sync = not (new or changed or removed or counts["pending"]) and (vcount == counts["embedded"] or vs.remote)
    return {
        "notes": counts["notes"], "embedded": counts["embedded"], "pending": counts["pending"],
        "model": emb.model_id, "model_spec": model_spec(settings), "dim": emb.dim, "device": emb.device,
        "index": {"database": idx.dialect, "refreshed_at": refreshed and time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(float(refreshed))),
                  "age_s": age, "newest_file_after_refresh_s": behind},
        "vectors": {"location": vectors.chroma_url(settings) or vs.folder, "count": vcount,
                    "writer_active": vectors.writer_active(settings)},
        "serve": os.path.exists(_socket_path(settings)),
        "out_of_sync": out_of_sync, "in_sync": in_sync,
    }


def _socket_path(settings) -> str:
    from geode.delivery.prompt_recall import socket_path

    return socket_path(settings.home)


def cmd_status(args) -> int:
    settings = _settings(args)
    st = recall_status(settings)
    if args.json:
        _dump(st)
        return 0
    print(f"notes      {st['notes']} ({st['embedded']} embedded, {st['pending']} pending)")
    print(f"model      {st['model']} ({st['dim']} dimensions) on {st['device']}")
    ix = st["index"]
    print(f"index      {ix['database']}, refreshed {ix['refreshed_at'] or 'never'}"
          + (f" ({ix['age_s']} s ago)" if ix["age_s"] is not None else ""))
    print(f"vectors    {st['vectors']['count']} in {st['vectors']['location']}"
          + (" (a writer is embedding now)" if st["vectors"]["writer_active"] else ""))
    o = st["out_of_sync"]
    if st["in_sync"]:
        print("in sync    the index matches the files and every note has its vector")
    else:
        print(f"out of sync: {o['files_not_indexed']} new, {o['files_changed']} changed, {o['indexed_files_gone']} gone "
              f"files; {o['notes_pending_vectors']} notes wait for a vector; Chroma holds {o['vectors_in_chroma']} "
              f"of {o['vectors_expected']} expected")
        for e in o["examples"]:
            print(f"  {e}")
        print("  run `geode reindex` to catch up")
    return 0


# -- serve ---------------------------------------------------------------------------------------
def serve(settings, interval_s: float = 5.0, full_every_s: float = 120.0, ready=None, stop_event=None) -> None:
    """Keep the model and Chroma warm and answer search requests on a UNIX socket; refresh the text
    index and embed pending notes in the background (as the one writer while the lock is free)."""
    import logging
    import socketserver
    import threading

    from geode.delivery.errors import GeodeError
    from geode.recall import vectors
    from geode.recall.recall_index import RecallIndex
    from geode.recall.search import search, semantic_for

    path = _socket_path(settings)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    semantic_for(settings)  # load the model and open Chroma now, not on the first prompt
    try:  # one search warms the SQL side too (statement caches, FTS pages)
        search(settings, "warm up", limit=1, refresh=True, chain=False)
    except Exception as exc:  # noqa: BLE001 - serve loop entry: reported, the server still starts
        print(f"geode serve: warm-up search failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    lock = threading.Lock()
    stop = stop_event or threading.Event()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            try:
                line = self.rfile.readline(1_000_000)
                req = json.loads(line or b"{}")
                if req.get("op") == "ping":
                    reply = {"ok": True, "pid": os.getpid()}
                else:
                    with lock:
                        res = search(settings, str(req.get("q") or ""), limit=int(req.get("limit") or 10),
                                     domain=req.get("domain"), type=req.get("type"), status=req.get("status"),
                                     tags=req.get("tags"), where=req.get("where"), after=req.get("after"),
                                     as_of=req.get("as_of"), mode=req.get("mode") or "hybrid",
                                     blend=req.get("blend") or "score", refresh=bool(req.get("refresh")),
                                     chain=not req.get("prompt"))
                    reply = dict(res, domains=[list(x) for x in sorted(settings.domains.items())])
            except Exception as exc:  # serve loop entry: a bad request gets its error, never takes the server down
                reply = {"error": str(exc)}
                if not isinstance(exc, (GeodeError, ValueError)):  # not the request's fault: keep the traceback
                    logging.getLogger(__name__).exception("geode serve: request failed")
            self.wfile.write(json.dumps(reply, ensure_ascii=False, default=str).encode("utf-8") + b"\n")

    class Server(socketserver.ThreadingUnixStreamServer):
        daemon_threads = True

    server = Server(path, Handler)
    os.chmod(path, 0o600)

    def background():
        # Searches are not held up by this thread: SQLite (WAL) and PostgreSQL let readers run
        # while it writes, and the model has its own lock. The first full pass waits a period.
        idx = RecallIndex(settings)
        last_full = time.time()
        while not stop.is_set():
            try:
                if time.time() - last_full > full_every_s:
                    idx.refresh()
                    last_full = time.time()
                else:
                    idx.quick_refresh()
                vectors.embed_pending(settings, limit=256)
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
    finally:
        server.shutdown()
        server.server_close()
        try:
            os.unlink(path)
        except OSError:
            pass


def cmd_serve(args) -> int:
    import signal
    import threading

    settings = _settings(args)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def ready():
        msg = {"socket": _socket_path(settings), "pid": os.getpid()}
        if args.json:
            _dump(msg, compact=True)
        else:
            print(f"geode serve: listening on {msg['socket']} (pid {msg['pid']})")
        sys.stdout.flush()

    serve(settings, interval_s=args.interval, ready=ready, stop_event=stop)
    return 0


# -- registration ----------------------------------------------------------------------------------
def register(sub, common) -> None:
    s = sub.add_parser("search", parents=[common], help="hybrid search of the notes (text and meaning)")
    s.add_argument("query", nargs="?", help="the question; omit it to list what the filters select")
    s.add_argument("--limit", type=int, default=10)
    s.add_argument("--domain", action="append", help="only this domain (repeatable)")
    s.add_argument("--type", action="append", help="only notes of this type (repeatable: any of them)")
    s.add_argument("--tag", action="append", help="notes carrying this tag, through the domain's tag aliases (repeatable: all)")
    s.add_argument("--status", action="append", help="only this status, e.g. stable (repeatable: any of them)")
    s.add_argument("--where", action="append", metavar="KEY=VALUE",
                   help="frontmatter filter: key=value, key=[a,b] (any), key~value (list contains), key>=value, key<value, key!=value")
    s.add_argument("--filter", metavar="JSON", help='frontmatter filter as JSON: {"sources": {"$contains_any": ["a", "b"]}}')
    s.add_argument("--after", metavar="DATE", type=argparse_date, help="recorded on or after this date (YYYY-MM-DD)")
    s.add_argument("--as-of", dest="as_of", metavar="DATE", type=argparse_date,
                   help="what applied on that date, YYYY-MM-DD (valid_from through valid_to, both inclusive; absent = unbounded)")
    s.add_argument("--mode", choices=["hybrid", "text", "semantic"], default="hybrid")
    s.add_argument("--blend", choices=["score", "rrf"], default="score", help=argparse_suppress())
    s.add_argument("--queries", metavar="FILE", help="one query per line; one JSON object per line with --json")
    s.add_argument("--no-refresh", action="store_true", help="do not look for changed files first")
    s.add_argument("--no-background", action="store_true", help="do not start the background embedder")
    s.add_argument("--no-server", action="store_true", help="search in this process even when geode serve runs")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("context", parents=[common], help="the neighbourhood of a note (build_context)")
    s.add_argument("address", help="geode://domain/permalink, or geode://domain/folder/*")
    s.add_argument("--depth", type=int, default=2, choices=[1, 2, 3])
    s.add_argument("--max-related", type=int, default=10)
    s.set_defaults(func=cmd_context)

    s = sub.add_parser("read", parents=[common], help="one note, its links resolved, its backlinks")
    s.add_argument("address")
    s.set_defaults(func=cmd_read)

    s = sub.add_parser("recent", parents=[common], help="what changed lately, across domains")
    s.add_argument("--period", default="week", help="day, week, fortnight, month, Nh, Nd, Nw or a date")
    s.add_argument("--domain", action="append")
    s.add_argument("--limit", type=int, default=50)
    s.set_defaults(func=cmd_recent)

    s = sub.add_parser("reindex", parents=[common], help="rebuild the binding and recall indexes from the files")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--full", action="store_true", help="re-read every file; keep embeddings of unchanged text")
    g.add_argument("--wipe", action="store_true", help="rebuild from nothing into a new location, switch when complete")
    s.add_argument("--no-wait", action="store_true", help="leave the vectors to the background embedder")
    s.set_defaults(func=cmd_reindex)

    s = sub.add_parser("status", parents=[common], help="the recall index: notes, vectors, model, device, what is out of sync")
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("serve", parents=[common], help="keep the model warm; answer searches on a local socket")
    s.add_argument("--interval", type=float, default=5.0, help="seconds between background refresh/embed passes")
    s.set_defaults(func=cmd_serve)


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS
