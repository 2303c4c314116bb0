"""``geode proposals list|show|approve|reject|undo|reconcile``: the approval queue.

Every command first settles any apply or undo that a crash cut short (``reconcile``) and says
so on stderr (and under ``"reconciled"`` with ``--json``). Every decision is recorded with
who (``--who``, default ``$USER``) and when.

JSON shapes (``--json``):

- ``list``: ``{"proposals": [{"id", "agent", "kind", "domain", "title", "status", "paths",
  "run_id", "key", "created_at", "updated_at", "message"}], "reconciled": [...]}``
- ``show``: the same fields plus ``"rationale"``, ``"evidence"``, ``"facts": [{"kind", "path",
  "line", "value", "provenance"}]`` (what it rests on and who wrote each), ``"changes": [{"path", "op",
  "before_sha", "after_sha", "mode", "before_mode"}]``, ``"actions": [{"action", "outcome",
  "who", "at", "detail"}]``, ``"diff"`` (unified diff text) and ``"reconciled"``.
- ``approve`` / ``reject`` / ``undo``: ``{"dry_run": bool, "results": [{"id", "action", "ok",
  "status", "message", "files": [{"path", "op"}]}], "reconciled": [...]}``, one result per id
  given, in order (an id with no proposal: ``ok`` false, ``status`` null, the message says so;
  the other ids are still acted on); a dry run's results
  add ``"would"`` (``apply`` | ``conflict`` | ``failed``), ``"title"``, ``"agent"``, ``"kind"``.
- ``reconcile``: ``{"reconciled": [{"id", "journal", "op", "outcome", "status", "message",
  "files": [{"path", "found"}]}]}``.

Exit status: 0 when every action succeeded, 1 when any was refused, conflicted or failed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from geode.agents.roster import NAMES


def who_decides(args) -> str:
    """Who decides, for the history: --who, then $USER or $LOGNAME, then the account this process
    runs as (a container or a cron job often has no $USER), never "unknown" while one is known."""
    name = args.who or os.environ.get("USER") or os.environ.get("LOGNAME")
    if name:
        return name
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


def _open(args, live: bool = False):
    """Settings, engine and the reconcile reports; ``live``: keep the reports of applies another
    process (another home sharing the records) is running now, which only ``reconcile`` shows."""
    from geode.queue import apply as A
    from geode.queue import tables as queue_tables
    from geode.services.invocation import engine_of
    from geode.services.invocation import settings_of as _settings

    settings = _settings(args)
    engine = engine_of(settings)  # a database that cannot be used is a message, not a traceback
    queue_tables.ensure_tables(engine)
    reconciled = A.reconcile(settings, engine, who_decides(args) if hasattr(args, "who") else "reconcile")
    if not live:
        reconciled = [r for r in reconciled if r["outcome"] != "in_progress"]
    if reconciled and not args.json:
        for r in reconciled:
            files = ", ".join(f"{f['path']}={f['found']}" for f in r["files"])
            print(f"geode: proposal {r['id']}: {r['message'] or r['outcome']} [{files}]", file=sys.stderr)
    return settings, engine, reconciled


def cmd_list(args) -> int:
    from geode.queue import proposals as Q
    from geode.services.invocation import print_json as _print_json

    _settings, engine, reconciled = _open(args)
    rows = Q.list_proposals(engine, agent=args.agent, kind=args.kind, status=args.status, domain=args.domain)
    if args.json:
        _print_json({"proposals": rows, "reconciled": reconciled})
        return 0
    if not rows:
        print("no proposals match")
        return 0
    for r in rows:
        n = len(r["paths"])
        print(
            f"{r['id']:>5}  {r['status']:<9} {r['agent']:<10} {r['kind']:<8} {r['domain']:<8} {r['title']}"
            f"  ({n} file{'s' if n != 1 else ''})"
        )
    return 0


def cmd_show(args) -> int:
    from geode.queue import proposals as Q
    from geode.queue import review as queue_review
    from geode.services.invocation import CLIError
    from geode.services.invocation import print_json as _print_json

    _settings, engine, reconciled = _open(args)
    got = Q.get(engine, args.id)
    if got is None:
        raise CLIError(f"no proposal {args.id}")
    p: dict[str, Any] = dict(got)
    text = queue_review.diff(engine, args.id)
    if args.json:
        p["diff"] = text
        p["reconciled"] = reconciled
        _print_json(p)
        return 0
    print(f"proposal {p['id']}: {p['title']}")
    print(f"  status    {p['status']}{' (' + p['message'] + ')' if p['message'] else ''}")
    print(f"  agent     {p['agent']}  kind {p['kind']}  domain {p['domain']}  run {p['run_id']}")
    print(f"  evidence  {', '.join(' '.join(f'{k}={v}' for k, v in e.items()) for e in p['evidence'])}")
    print(f"  rationale {p['rationale']}")
    for f in p.get("facts") or []:
        print(f"  fact      {fact_line(f)}")
    for a in p["actions"]:
        print(f"  {a['at']}  {a['action']:<9} {a['outcome']:<11} by {a['who']}")
    print()
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def fact_line(f: dict) -> str:
    """One fact a proposal rests on, as a person reads it: where, what, and who wrote it."""
    where = f["path"] + (f":{f['line']}" if f.get("line") else "")
    value = f.get("value")
    said = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    who = f.get("provenance") or "person"
    who = f"written by proposal #{who.split(':', 1)[1]}" if who.startswith("geode:") else "written by a person"
    return f"{f['kind']} {where}: {said} ({who})"


def _each(ids: list[int], action: str, fn, dry_run: bool = False) -> list[dict]:
    """``fn(id)`` for every id, in order; an id that cannot be acted on (no such proposal, or
    one that changed meanwhile) is a result that says why (``ok`` false, ``status`` null), and
    the ids after it are still acted on: one missing id never hides what happened to the rest."""
    from geode.queue import proposals as Q

    out = []
    for i in ids:
        try:
            out.append(fn(i))
        except Q.ProposalError as exc:
            r = {"id": i, "action": action, "ok": False, "status": None, "message": str(exc), "files": []}
            if dry_run:
                r["would"] = "error"
            out.append(r)
    return out


def _print_results(args, results: list[dict], reconciled: list[dict], dry_run: bool = False) -> int:
    from geode.services.invocation import print_json as _print_json

    if args.json:
        _print_json({"dry_run": dry_run, "results": results, "reconciled": reconciled})
    else:
        if not results:
            print("no pending proposals match")
        for r in results:
            if dry_run:
                print(
                    f"{r['id']:>5}  would {r['would']:<8} {r.get('agent', '')} {r.get('kind', '')} "
                    f"{r.get('title', '')}: {r['message']}"
                )
            else:
                print(_sentence(r))
    return 0 if all(r["ok"] for r in results) else 1


_DONE = {"approve": "approved", "reject": "rejected", "undo": "undone"}


def _sentence(r: dict) -> str:
    """One plain sentence per proposal: ``proposal 3 approved and applied.`` or ``proposal 3 was
    not approved: <why>`` (the JSON keeps action, ok, status and message apart)."""
    verb = _DONE.get(r["action"], r["action"])
    msg = (r.get("message") or "").strip()
    if r["ok"]:
        status = r["status"] if r["status"] not in (verb, r["action"]) else ""
        tail = f" and {status}" if status else ""
        extra = f" ({msg})" if msg and msg not in (r["status"], verb) else ""
        if r["action"] == "undo" and not extra:  # say what an undo did, not just that it ran
            extra = ": every file it changed holds its bytes from before the apply again"
        return f"proposal {r['id']} {verb}{tail}{extra}."
    if r["status"] is None:  # no such proposal
        return f"proposal {r['id']} was not {verb}: {msg or 'no such proposal'}."
    return f"proposal {r['id']} was not {verb}: {msg or r['status']} (status {r['status']})."


def cmd_approve(args) -> int:
    from geode.queue import apply as A
    from geode.queue import proposals as Q
    from geode.queue import review as queue_review
    from geode.services.invocation import EXIT_USAGE, CLIError

    if args.ids and (args.agent or args.kind or args.domain):
        raise CLIError("give proposal ids, or --agent/--kind (with --domain), not both", EXIT_USAGE)
    if not args.ids and not (args.agent or args.kind):
        raise CLIError("give proposal ids, or --agent and/or --kind for a bulk approval", EXIT_USAGE)
    settings, engine, reconciled = _open(args)
    who = who_decides(args)
    try:
        if args.ids:
            if args.dry_run:
                results = _each(args.ids, "approve", lambda i: queue_review.preview(settings, engine, i), True)
            else:
                results = _each(args.ids, "approve", lambda i: A.approve(settings, engine, i, who))
        else:
            results = A.approve_many(
                settings, engine, who, agent=args.agent, kind=args.kind, domain=args.domain, dry_run=args.dry_run
            )
    except Q.ProposalError as exc:
        raise CLIError(str(exc)) from exc
    return _print_results(args, results, reconciled, args.dry_run)


def cmd_reject(args) -> int:
    from geode.queue import review as queue_review

    settings, engine, reconciled = _open(args)
    results = _each(
        args.ids, "reject", lambda i: queue_review.reject(settings, engine, i, who_decides(args), args.reason or "")
    )
    return _print_results(args, results, reconciled)


def cmd_undo(args) -> int:
    from geode.queue import apply as A

    settings, engine, reconciled = _open(args)
    results = _each(args.ids, "undo", lambda i: A.undo(settings, engine, i, who_decides(args)))
    return _print_results(args, results, reconciled)


def cmd_reconcile(args) -> int:
    from geode.services.invocation import print_json as _print_json

    _settings, _engine, reconciled = _open(args, live=True)
    if args.json:
        _print_json({"reconciled": reconciled})
    elif not reconciled:
        print("nothing to reconcile: no apply or undo was interrupted")
    return 0 if all(r["outcome"] != "error" for r in reconciled) else 1


def register(sub, common) -> None:
    p = sub.add_parser("proposals", help="the approval queue: list, show, approve, reject, undo")
    ps = p.add_subparsers(dest="proposals_cmd", metavar="ACTION")
    ps.required = True

    def who(s):
        s.add_argument("--who", help="who decides (default: $USER); recorded with the time")

    s = ps.add_parser("list", parents=[common], help="proposals, filtered")
    s.add_argument("--agent", help=f"only this agent's ({', '.join(NAMES)})")
    s.add_argument("--kind", choices=["edit", "move", "archive", "status", "new_note"], help="only this kind")
    s.add_argument(
        "--status",
        choices=["pending", "applied", "rejected", "undone", "conflict", "failed"],
        help="only this status (default: all)",
    )
    s.add_argument("--domain", help="only this domain")
    s.set_defaults(func=cmd_list)

    s = ps.add_parser("show", parents=[common], help="one proposal with its unified diff and history")
    s.add_argument("id", type=int, help="the proposal's number (geode proposals list)")
    s.set_defaults(func=cmd_show)

    s = ps.add_parser("approve", parents=[common], help="apply proposals (by id, or in bulk by agent and kind)")
    s.add_argument("ids", type=int, nargs="*", metavar="ID", help="proposal numbers (or --agent/--kind for bulk)")
    s.add_argument("--agent", help="bulk: every pending proposal of this agent")
    s.add_argument(
        "--kind",
        choices=["edit", "move", "archive", "status", "new_note"],
        help="bulk: every pending proposal of this kind",
    )
    s.add_argument("--domain", help="bulk: only this domain")
    s.add_argument("--dry-run", action="store_true", help="say what would be applied; change nothing")
    who(s)
    s.set_defaults(func=cmd_approve)

    s = ps.add_parser("reject", parents=[common], help="reject proposals (no file is touched)")
    s.add_argument("ids", type=int, nargs="+", metavar="ID", help="proposal numbers")
    s.add_argument("--reason", help="why, recorded with the decision")
    who(s)
    s.set_defaults(func=cmd_reject)

    s = ps.add_parser("undo", parents=[common], help="restore the exact bytes and mode from before an apply")
    s.add_argument("ids", type=int, nargs="+", metavar="ID", help="proposal numbers")
    who(s)
    s.set_defaults(func=cmd_undo)

    s = ps.add_parser("reconcile", parents=[common], help="settle applies or undos a crash cut short")
    who(s)
    s.set_defaults(func=cmd_reconcile)
