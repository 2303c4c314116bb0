"""Recall commands: search, context, read, recent (and, registered from here, reindex and status in
``geode.cli.index_cmds``, serve in ``geode.cli.serve_cmds``). Each takes ``--json``.

Registered by ``geode.cli.main``; the filter language is ``geode.services.filters``. Heavy imports
(SQLAlchemy, numpy, Chroma, the model) happen inside the command functions, so other commands stay
quick. JSON shapes: docs/RECALL.md.
"""

from __future__ import annotations

import os
import sys

# light imports only (the standard library, the settings): the flags stay quick
from geode.cli import index_cmds, serve_cmds
from geode.kernel.dates import argparse_date
from geode.recall.results import SHOWN_FLOOR
from geode.services import search_server
from geode.services.filters import parse_where
from geode.services.invocation import print_json, settings_of


# -- search -----------------------------------------------------------------------------------
def _search_kwargs(args) -> dict:
    return dict(
        limit=args.limit,
        domain=args.domain or None,
        type=args.type or None,
        status=args.status or None,
        tags=args.tag or None,
        where=parse_where(args.where, args.filter) or None,
        after=args.after,
        as_of=args.as_of,
        mode=args.mode,
        blend=args.blend,
    )


def _by_words(counts: dict) -> str:
    """``{'links_to': 2, 'relates_to': 1}`` as a person reads it: ``: 2 links_to, 1 relates_to``."""
    if not counts:
        return ""
    return ": " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


#: Results under this score are not listed for a person (``--json`` keeps them all): the one
#: floor the page and the MCP tool use too (``geode.recall.results.SHOWN_FLOOR``).
SCORE_FLOOR = SHOWN_FLOOR


def _print_hits(res: dict, show_all: bool = False) -> None:
    show_all = show_all or not res.get("query")  # a listing by filters alone has no relevance to cut at
    hidden = [h for h in res["results"] if h["score"] < SCORE_FLOOR and not show_all]
    if not res["results"]:
        print("(no note matches)")
    elif len(hidden) == len(res["results"]):
        print(f"(no note matches well: {len(hidden)} weak result(s) under {SCORE_FLOOR} hidden; --all lists them)")
    for h in res["results"]:
        if h in hidden:
            continue
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
    weak = f"; {len(hidden)} under {SCORE_FLOOR} hidden (--all)" if hidden else ""
    how = (
        "score: full-text relevance, 1 = the best match"
        if res["mode"] == "text"
        else "score: half full-text relevance (1 = the best match), half closeness in meaning above an unrelated note's"
    )
    print(
        f"({len(res['results']) - len(hidden)} of {res['total']}, mode {res['mode']}{weak}{extra}; {how})",
        file=sys.stderr,
    )


def _via_server(settings, query: str, kw: dict) -> dict | None:
    """The search done by a warm ``geode serve`` (model loaded, Chroma open), or None."""
    from geode.delivery.prompt_recall import ask_server

    req = {"op": "search", "q": query, "refresh": True, **kw}
    refused: list[str] = []
    reply = ask_server(settings.home, req, 30.0, refused=refused)
    for why in refused:  # a socket this user cannot trust: said once, then the search runs cold
        print(f"geode: not using the warm search server: {why}", file=sys.stderr)
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
    from geode.services.invocation import CLIError

    settings = settings_of(args)
    start_serve = False
    if not args.queries and not args.no_server and args.query is not None:
        from geode.delivery.prompt_recall import socket_path

        sock = socket_path(settings.home)
        if sock and os.path.lexists(sock):
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
                    print_json(res)
                else:
                    _print_hits(res, args.all)
                return 0
        start_serve = not args.no_background  # none answered: this search is cold, the next one warm
    from geode.recall import vectors
    from geode.recall.filters import FilterError
    from geode.recall.search import search

    vectors.use_lite_reader()  # this process only reads vectors, then exits: no `import chromadb`
    try:
        kw = _search_kwargs(args)
        if args.queries:
            with open(args.queries, encoding="utf-8") as fh:
                lines = [ln.rstrip("\n") for ln in fh]
            first = True
            for q in lines:
                if not q.strip():
                    continue
                res = dict(search(settings, q, refresh=first and not args.no_refresh, **kw))
                first = False
                if args.json:
                    print_json(res, compact=True)
                else:
                    print(f"== {q}")
                    _print_hits(res, args.all)
            return 0
        if args.query is None and not any(
            [args.domain, args.type, args.status, args.tag, args.where, args.filter, args.after, args.as_of]
        ):
            raise CLIError("give a query, a filter, or --queries FILE", 2)
        res = dict(
            search(settings, args.query or "", refresh=not args.no_refresh, background=not args.no_background, **kw)
        )
    except (FilterError, ValueError, OSError) as exc:
        raise CLIError(str(exc), 2) from exc
    _log_search(settings, args.query, res)
    if args.json:
        print_json(res)
    else:
        _print_hits(res, args.all)
    if start_serve:  # after the answer is out: its start-up must not slow this search on a small machine
        sys.stdout.flush()
        started = search_server.start_on_demand(settings)
        if started is not None:
            idle = int(settings.recall.serve_idle_s or 0)
            print(
                f"(started geode serve in the background, pid {started}: the next search is warm; it stops after "
                f"{idle // 60 if idle >= 60 else idle} {'min' if idle >= 60 else 's'} without a search, "
                "or now with `geode serve --stop`)",
                file=sys.stderr,
            )
    return 0


def cmd_context(args) -> int:
    from geode.recall.context import NotFound, build_context
    from geode.services.invocation import CLIError

    settings = settings_of(args)
    try:
        res = build_context(settings, args.address, depth=args.depth, max_related=args.max_related)
    except (NotFound, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    if args.json:
        print_json(res)
        return 0
    print(
        f"neighbourhood of {', '.join(res['anchors'][:5])}{' …' if len(res['anchors']) > 5 else ''} "
        f"({res['total']} within {res['depth']} hops, top {len(res['related'])}; "
        "score: how closely linked, higher for fewer hops and more paths)"
    )
    for r in res["related"]:
        arrow = "->" if r["direction"] == "out" else "<-"
        print(
            f"{r['score']:.3f}  {r['title']}  {r['address']}  {arrow} {r['relation']} (hops {r['hops']}, paths {r['paths']})"
        )
    return 0


def _closest_hint(settings, address: str) -> str:
    """``did you mean`` with the closest addresses (as the MCP tool answers), or a way on."""
    from geode.recall.closest import closest
    from geode.recall.search import index_for

    idx = index_for(settings)  # the process's cached index: not closed here
    close = closest(settings, lambda: idx, address)
    if not close:
        return "`geode search WORDS` finds a note's address"
    return "did you mean " + "; ".join(f"{a} ({t})" for a, t in close)


def cmd_read(args) -> int:
    from geode.recall.context import NotFound, read_note
    from geode.services.invocation import CLIError

    settings = settings_of(args)
    try:
        res = read_note(settings, args.address)
    except NotFound as exc:
        raise CLIError(str(exc), hint=_closest_hint(settings, args.address)) from exc
    except OSError as exc:
        raise CLIError(str(exc)) from exc
    from geode.delivery.search_log import record_read

    session = os.environ.get("GEODE_SESSION") or os.environ.get("CLAUDE_SESSION_ID") or f"cli-{os.getpid()}"
    record_read(settings, res["domain"], res["path"], res["address"], session, via="cli")  # use, for the Cleaner
    if args.json:
        print_json(res)
        return 0
    print(res["content"], end="" if res["content"].endswith("\n") else "\n")
    print("\n-- links", file=sys.stderr)
    for lk in res["links"]:
        state = f"-> {lk['address']}" if lk["resolved"] else "(unresolved)"
        print(f"  line {lk['line']}: {lk['relation']} {lk['target']} {state}", file=sys.stderr)
    b = res["backlinks"]
    print(f"-- {b['count']} backlink(s){_by_words(b['by_relation'])}", file=sys.stderr)
    if res["next"]:
        print(f"-- next: {res['next']['command']}", file=sys.stderr)
    return 0


def cmd_recent(args) -> int:
    from geode.recall.context import recent_activity
    from geode.services.invocation import CLIError

    settings = settings_of(args)
    try:
        res = recent_activity(settings, args.period, domain=args.domain or None, limit=args.limit)
    except ValueError as exc:
        raise CLIError(str(exc), 2) from exc
    if args.json:
        print_json(res)
        return 0
    print(
        f"changed in the last {res['period']} (since {str(res['since'])[:16]}): {res['total']} note(s)"
        + (": " + ", ".join(f"{n} in {d}" for d, n in res["by_domain"].items()) if res["by_domain"] else "")
    )
    for r in res["results"]:
        print(f"{r['date'][:16]}  {r['domain']:<10} {r['title']}  {r['address']}")
    return 0


# -- registration ----------------------------------------------------------------------------------
def register(sub, common) -> None:
    s = sub.add_parser("search", parents=[common], help="hybrid search of the notes (text and meaning)")
    s.add_argument("query", nargs="?", help="the question; omit it to list what the filters select")
    s.add_argument("--limit", type=int, default=10, help="at most this many results (default 10)")
    s.add_argument("--all", action="store_true", help=f"also list the weak results (score under {SCORE_FLOOR})")
    s.add_argument("--domain", action="append", help="only this domain (repeatable)")
    s.add_argument("--type", action="append", help="only notes of this type (repeatable: any of them)")
    s.add_argument(
        "--tag", action="append", help="notes carrying this tag, through the domain's tag aliases (repeatable: all)"
    )
    s.add_argument("--status", action="append", help="only this status, e.g. stable (repeatable: any of them)")
    s.add_argument(
        "--where",
        action="append",
        metavar="KEY=VALUE",
        help="frontmatter filter: key=value, key=[a,b] (any), key~value (list contains), key>=value, key<value, key!=value",
    )
    s.add_argument(
        "--filter", metavar="JSON", help='frontmatter filter as JSON: {"sources": {"$contains_any": ["a", "b"]}}'
    )
    s.add_argument("--after", metavar="DATE", type=argparse_date, help="recorded on or after this date (YYYY-MM-DD)")
    s.add_argument(
        "--as-of",
        dest="as_of",
        metavar="DATE",
        type=argparse_date,
        help="what applied on that date, YYYY-MM-DD (valid_from through valid_to, both inclusive; absent = unbounded)",
    )
    s.add_argument(
        "--mode",
        choices=["hybrid", "text", "semantic"],
        default="hybrid",
        help="hybrid (default): words and meaning; text: words only; semantic: meaning only",
    )
    s.add_argument(
        "--blend",
        choices=["margin", "adaptive", "rrf", "minmax", "score"],
        default=None,
        help="how hybrid fuses full text and meaning (default: [recall] blend, margin; docs/RECALL.md)",
    )
    s.add_argument("--queries", metavar="FILE", help="one query per line; one JSON object per line with --json")
    s.add_argument("--no-refresh", action="store_true", help="do not look for changed files first")
    s.add_argument(
        "--no-background",
        action="store_true",
        help="start nothing in the background (neither the embedder nor a geode serve for the next search)",
    )
    s.add_argument(
        "--no-server", action="store_true", help="search in this process, neither asking nor starting geode serve"
    )
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("context", parents=[common], help="the neighbourhood of a note (build_context)")
    s.add_argument("address", help="geode://domain/permalink, or geode://domain/folder/*")
    s.add_argument("--depth", type=int, default=2, choices=[1, 2, 3], help="links followed from the note (default 2)")
    s.add_argument("--max-related", type=int, default=10, help="at most this many related notes (default 10)")
    s.set_defaults(func=cmd_context)

    s = sub.add_parser("read", parents=[common], help="one note, its links resolved, its backlinks")
    s.add_argument("address", help="the note: geode://domain/permalink")
    s.set_defaults(func=cmd_read)

    s = sub.add_parser("recent", parents=[common], help="what changed lately, across domains")
    s.add_argument("--period", default="week", help="day, week, fortnight, month, Nh, Nd, Nw or a date")
    s.add_argument("--domain", action="append", help="only this domain (repeatable)")
    s.add_argument("--limit", type=int, default=50, help="at most this many notes (default 50)")
    s.set_defaults(func=cmd_recent)

    index_cmds.register(sub, common)
    serve_cmds.register(sub, common)
