"""The ``geode`` command line. Settings are read once here and passed down.

Each command imports what it needs when it runs (SQLModel costs ~0.4 s to import), so
``geode hook`` and ``geode deliver`` stay quick. Every reporting command takes ``--json``;
the shapes are documented in README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import shutil
import sys
from pathlib import Path

from geode.cli.common import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, CLIError, engine_of, print_json, settings_of
from geode.delivery.config import Settings, load_settings
from geode.delivery.errors import GeodeError

STARTER_DIR = Path(__file__).resolve().parent.parent / "delivery" / "starter"


# -- init -----------------------------------------------------------------------------
def write_default_config(settings: Settings, store_root: str) -> Path:
    """``geode.toml`` with the control plan fixed now, before any data exists."""
    path = Path(settings.config_path)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    stop = (dt.date.today() + dt.timedelta(days=90)).isoformat()
    path.write_text(
        "# geode configuration. Documented in README.md.\n"
        '[store]\ndefault = "main"\n\n'
        "[domains]\n"
        f"main = {json.dumps(store_root)}\n\n"
        "[delivery]\n"
        "budget = 4000          # characters per action, shared by every crystal that matched\n"
        "inject_budget = 1200   # characters per prompt for inject crystals\n"
        "boot_chars = 300       # each boot crystal is cut here, with a visible mark\n"
        'act_mode = "context"   # or "deny-once": see README, \'When additionalContext does not arrive\'\n'
        "block_lookups = true\n\n"
        "# The control arm. Fixed here before any data exists; the ledger records it on creation\n"
        "# and later edits do not change the plan in force (geode study reports any difference).\n"
        "[control]\n"
        "withhold_rate = 0.10\n"
        "stop_units = 100\n"
        f'stop_date = "{stop}"\n'
        f'salt = "{secrets.token_hex(16)}"\n',
        encoding="utf-8",
    )
    return path


def ensure_store(settings: Settings, with_starter: bool = True) -> dict:
    """Create the config, the store with the starter set (never overwriting), the ledger, the index."""
    from geode.delivery.index import Index

    created = []
    if not settings.one_off_store:
        write_default_config(settings, settings.domains[settings.default_domain])
        settings = _reload(settings)
    root = Path(settings.domains[settings.default_domain])
    root.mkdir(parents=True, exist_ok=True)
    if with_starter and not any(root.rglob("*.md")):
        for src in sorted(STARTER_DIR.glob("*.md")):
            dest = root / src.name
            if not dest.exists():
                shutil.copyfile(src, dest)
                created.append(src.name)
    engine_of(settings)
    idx = Index(settings, busy_ms=5000)
    try:
        idx.build()
        counts = idx.counts()
    finally:
        idx.close()
    return {"settings": settings, "store": str(root), "created": created, "index": counts}


def _reload(settings: Settings) -> Settings:
    return load_settings(home=settings.home) if not settings.one_off_store else settings


def cmd_init(args) -> int:
    settings = settings_of(args)
    if args.store_dir:
        settings = load_settings(store=args.store_dir, home=args.home)
    r = ensure_store(settings, with_starter=not args.empty)
    out = {
        "home": r["settings"].home,
        "store": r["store"],
        "starter_written": r["created"],
        "index": r["index"],
        "config": r["settings"].config_path,
    }
    if args.json:
        print_json(out)
    else:
        print(f"geode home  {out['home']}")
        print(f"store       {out['store']}  ({len(r['created'])} starter crystals written)")
        print(f"index       {r['index']['crystals']} crystals in {r['index']['files']} note files")
        print("next        geode hooks install   (then: geode deliver --on bash --text 'npm test | tail')")
    return EXIT_OK


# -- hooks -------------------------------------------------------------------------------
def cmd_hooks(args) -> int:
    from geode.delivery import install as inst
    from geode.delivery import install_mcp as im
    from geode.delivery.install_files import InstallError
    from geode.delivery.install_mcp_entry import mcp_entry
    from geode.delivery.install_probe import verify_mcp_entry

    settings = settings_of(args)
    results = []
    mcp = not args.no_mcp  # the recall tools' server is registered beside the hooks (geode mcp)
    try:
        agents = inst.resolve_agents(args.agent)
        # settings.home: --home, then GEODE_HOME, then ~/.geode (the flag wins, as everywhere)
        home, store = settings.home, args.store if args.store else None
        if args.action == "install" and not args.print and mcp:  # before anything is written
            verify_mcp_entry(mcp_entry(home=home, store=store))
        for agent in agents:
            kw = dict(
                scope=args.scope,
                project=args.project or os.getcwd(),
                local=args.local and agent == "claude",
                home_dir=args.home_dir,
            )
            if args.action == "uninstall":
                r = inst.uninstall(agent, **kw)
                if mcp:
                    r["mcp"] = im.uninstall_mcp(agent, **kw)
                results.append(r)
                continue
            kw.update(geode_home=home, store=store)
            if args.print:
                r = inst.plan(agent, **kw)
                if mcp:
                    r["mcp"] = im.plan_mcp(agent, **kw)
            else:
                r = inst.install(agent, **kw)
                if mcp:
                    r["mcp"] = im.install_mcp(agent, **kw, verify=False)
            results.append(r)
    except InstallError as exc:
        raise CLIError(str(exc)) from exc
    if args.action == "install" and not args.print:
        _precompile()
        from geode.delivery.index import Index

        idx = Index(settings, busy_ms=5000)
        try:
            idx.ensure()
        finally:
            idx.close()
        engine_of(settings)
    if args.json:
        print_json(results)
        return EXIT_OK
    for r in results:
        m = r.get("mcp")
        if args.print:
            print(f"{r['agent']}: would write {r['path']}")
            for ev, spec in r["events"].items():
                print(f"  {ev:<17} matcher={spec.get('matcher') or '-':<40} {spec['command']}")
            if m:
                print(f"{r['agent']}: would register the MCP server in {m['path']} ({m['key']}):")
                print("  " + m["text"].rstrip("\n").replace("\n", "\n  "))
        elif args.action == "install":
            state = "unchanged" if r.get("unchanged") else f"added {', '.join(r.get('added') or []) or 'nothing'}"
            print(f"{r['agent']}: {r['path']}: {state}")
            if r.get("notice"):
                print(f"  {r['notice']}")
            if m:
                what = "unchanged" if m["unchanged"] else ("replaced" if m["replaced"] else "added")
                print(f"{r['agent']}: {m['path']}: MCP server {m['name']!r} {what}")
                if m.get("notice"):
                    print(f"  {m['notice']}")
        else:
            print(f"{r['agent']}: {r['path']}: removed {r.get('removed', 0)} geode hook(s)")
            if m:
                print(
                    f"{r['agent']}: {m['path']}: removed {m['removed']} MCP server entry"
                    + (f" (kept: {m['kept']})" if m.get("kept") else "")
                )
    return EXIT_OK


def _precompile() -> None:
    """Byte-compile the hook's modules: with PYTHONDONTWRITEBYTECODE set (common in agent
    shells) an uncompiled hook recompiles every module on every tool call (~10 ms)."""
    import compileall

    pkg = Path(__file__).resolve().parent.parent
    compileall.compile_file(str(pkg / "__init__.py"), quiet=1)
    compileall.compile_dir(str(pkg / "delivery"), quiet=1)


def cmd_hook(args) -> int:
    from geode.delivery import hookmain

    return hookmain.main([args.agent])


# -- deliver -------------------------------------------------------------------------------
def cmd_deliver(args) -> int:
    from geode.delivery.engine import Delivery
    from geode.delivery.index import Index

    settings = settings_of(args)
    engine_of(settings)
    idx = Index(settings, busy_ms=5000)
    try:
        idx.ensure()
        idx.refresh()
        d = Delivery(
            settings,
            args.session or f"cli-{os.getpid()}",
            os.environ.get("GEODE_AGENT") and f"main:{os.environ['GEODE_AGENT']}" or "main",
            idx,
        )
        if args.on == "boot":
            res = d.boot()
        elif args.on == "prompt":
            res = d.inject(args.text or "")
        else:
            actions = tuple(a.strip() for a in args.on.split(",") if a.strip())
            from geode.delivery.binding import ACTIONS

            bad = [a for a in actions if a not in ACTIONS]
            if bad:
                raise CLIError(
                    f"--on {args.on!r}: unknown action {bad[0]!r}; expected one of {', '.join(ACTIONS)}, boot, prompt",
                    EXIT_USAGE,
                )
            if args.text is None:
                raise CLIError("--text is required for an action", EXIT_USAGE)
            from geode.delivery.hook import is_commit

            if "bash" in actions and "commit" not in actions and is_commit(args.text):
                actions = actions + ("commit",)
            res = d.act(actions, args.text, "commit" if "commit" in actions else actions[0])
        d.flush()
        d.close()
    finally:
        idx.close()
    if args.json:
        print_json(res)
    else:
        if res["text"]:
            print(res["text"], end="")
        else:
            print(f"(nothing bound to {args.on} matched)")
        for kind in ("withheld", "skipped", "suppressed"):
            for e in res[kind]:
                print(f"[{kind}] {e['name']} ({e['domain']}/{e['path']}): {e.get('reason', '')}", file=sys.stderr)
    return EXIT_OK


# -- reports ------------------------------------------------------------------------------
def _term_shares(settings):
    """What share of the ledger's actions each term selected crystals on; None when the
    ledger cannot be read (lint then says so and checks everything else)."""
    from sqlalchemy.exc import SQLAlchemyError

    from geode.delivery.lint import ledger_term_shares

    if settings.uses_sqlite_ledger and not os.path.exists(settings.ledger_path):
        return {}
    try:
        engine = engine_of(settings)
        try:
            with engine.connect() as conn:
                return ledger_term_shares(conn)
        finally:
            engine.dispose()
    except (GeodeError, SQLAlchemyError, OSError) as exc:  # the other checks do not depend on the ledger
        print(
            f"geode lint: the ledger could not be read ({type(exc).__name__}: {exc}); "
            "terms were not checked against it",
            file=sys.stderr,
        )
        return None


def cmd_lint(args) -> int:
    from geode.delivery.lint import lint_store

    settings = settings_of(args)
    shares = _term_shares(settings)
    r = lint_store(settings, term_shares=shares)
    r["examined"]["ledger_terms"] = len(shares) if shares is not None else None
    if args.json:
        print_json({"problems": r["problems"], "examined": r["examined"]})
    else:
        changed = 0
        for p in r["problems"]:
            if p["severity"] == "info" and not args.verbose:
                changed += p["code"] == "match-meaning-changed"
                continue
            dom = f"{p['domain']}:" if len(settings.domains) > 1 and p.get("domain") else ""
            print(f"{dom}{p['path']}:{p['line']}: {p['severity']}: {p['message']} [{p['code']}]")
        ex = r["examined"]
        print(
            f"examined {ex['notes']} notes ({ex['crystals']} crystals) in {ex['files']} files across "
            f"{ex['domains']} domain(s); {r['errors']} errors, {r['warnings']} warnings"
        )
        if changed:
            print(
                f"{changed} match term(s) mean something else under token-aware matching than under the old "
                "substring rule: `geode lint --verbose` lists each (README, 'Migrating from substring matching')"
            )
    return EXIT_PROBLEMS if r["errors"] else EXIT_OK


def registered_crystals(settings: Settings) -> tuple[list[str], list[str]]:
    """Crystal ids (``domain:path``) of bound notes, and those whose essence exceeds the budget."""
    from geode.delivery.pack import Item, render
    from geode.delivery.store import load_store

    ids, oversize = [], []
    for domain, root in settings.domain_roots():
        for n in load_store(root, domain, settings.max_file_bytes).notes:
            if isinstance(n.frontmatter.get("crystal"), dict):
                cid = f"{domain}:{n.path}"
                ids.append(cid)
                if (
                    n.essence
                    and len(render(Item(cid, domain, n.path, n.path, n.name, "x" * 12, n.essence), "bash"))
                    > settings.budget
                ):
                    oversize.append(cid)
    return ids, oversize


def cmd_stats(args) -> int:
    from geode.delivery.stats import compute_stats, render_stats

    settings = settings_of(args)
    engine = engine_of(settings)
    ids, oversize = registered_crystals(settings)
    d = compute_stats(settings, engine, ids, oversize, days=args.days)
    if args.json:
        print_json(d)
    else:
        print(render_stats(d))
    return EXIT_OK


def cmd_study(args) -> int:
    from geode.delivery.study import compute_study, render_study

    settings = settings_of(args)
    d = compute_study(settings, engine_of(settings))
    if args.json:
        print_json(d)
    else:
        print(render_study(d))
    return EXIT_OK


def cmd_reindex(args) -> int:
    from geode.delivery.index import Index

    settings = settings_of(args)
    idx = Index(settings, busy_ms=10000)
    try:
        import time

        t = time.perf_counter()
        counts = idx.build()
        counts.update(idx.counts())
        counts["seconds"] = round(time.perf_counter() - t, 3)
    finally:
        idx.close()
    if args.json:
        print_json({"bindings": counts})
    else:
        print(
            f"binding index: {counts['crystals']} crystals in {counts['files']} note files, "
            f"{counts['folders']} folders ({counts['seconds']} s)"
        )
    return EXIT_OK


# -- the main job ---------------------------------------------------------------------------
def cmd_run(args) -> int:
    """The embedded default end to end: a store (created with the starter set when there is
    none), one delivery shown as the agent would read it, lint, stats, and the upkeep run of
    the maintenance agents (in this process: the embedded default needs no server)."""
    settings = settings_of(args)
    root = settings.domains[settings.default_domain]
    fresh = not Path(root).is_dir() or not any(Path(root).rglob("*.md"))
    r = ensure_store(settings) if fresh else None
    if r is not None:
        settings = r["settings"]
        print(f"== created the default store at {r['store']} with {len(r['created'])} starter crystals")
    else:
        print(f"== store {root}")
    from geode.delivery.engine import Delivery
    from geode.delivery.index import Index

    engine_of(settings)
    idx = Index(settings, busy_ms=5000)
    command = args.command
    try:
        idx.ensure()
        idx.refresh()
        d = Delivery(
            settings.replace(withhold_rate=0.0, withhold_rate_source="GEODE_WITHHOLD_RATE"),
            f"geode-run-{os.getpid()}",
            "main",
            idx,
        )
        res = d.act(("bash",), command, "bash")
        d.events = []  # a demonstration is not usage: it goes to no ledger
        d.close()
    finally:
        idx.close()
    print(f"\n== what an agent about to run `{command}` is handed (withholding off for this demonstration):\n")
    print(res["text"] or "(nothing matched)")
    for e in res["delivered"]:
        print(
            f"   delivered {e['name']}: matched {e['term']!r}, {e['chars']} chars{' (cut)' if e['truncated'] else ''}"
        )
    print("\n== geode lint")
    lint_args = argparse.Namespace(store=args.store, home=args.home, json=False, verbose=False)
    lint_rc = cmd_lint(lint_args)
    print("\n== geode stats")
    cmd_stats(argparse.Namespace(store=args.store, home=args.home, json=False, days=None))
    upkeep_rc = _run_upkeep(args)
    if not res["delivered"]:
        print(
            "\nerror: the demonstration delivered nothing; the store has no crystal bound to this command",
            file=sys.stderr,
        )
        return EXIT_PROBLEMS
    return lint_rc or upkeep_rc


def _run_upkeep(args) -> int:
    """The maintenance agents, in this process: what they examined, found and proposed."""
    try:
        from geode.cli import upkeep_cmds
    except ModuleNotFoundError as exc:
        if exc.name != "geode.cli.upkeep_cmds":
            raise
        return EXIT_OK
    print("\n== geode upkeep (in this process; proposals wait for a person: geode proposals list)")
    return upkeep_cmds.cmd_upkeep(
        argparse.Namespace(
            store=args.store,
            home=args.home,
            json=False,
            list=False,
            run_id=None,
            agent=None,
            limit=50,
            in_process=True,
            wait=600.0,
        )
    )


# -- parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", metavar="DIR", help="a one-off store folder (instead of the configured domains)")
    common.add_argument("--home", metavar="DIR", help="GEODE_HOME for this command (default: $GEODE_HOME or ~/.geode)")
    common.add_argument("--json", action="store_true", help="print the documented JSON shape")

    p = argparse.ArgumentParser(prog="geode", description="Crystal memory for coding agents.")
    sub = p.add_subparsers(dest="command_name", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser(
        "run", parents=[common], help="the main job on the embedded default: store, a delivery, lint, stats"
    )
    s.add_argument(
        "--command", default="npm run build 2>&1 | tail -20", help="the shell command to show a delivery for"
    )
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("init", parents=[common], help="create GEODE_HOME, geode.toml and a store with the starter set")
    s.add_argument("store_dir", nargs="?", help="create the store here instead (a one-off store)")
    s.add_argument("--empty", action="store_true", help="no starter crystals")
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("hooks", parents=[common], help="install or remove the agent hooks and the MCP server")
    s.add_argument("action", choices=["install", "uninstall"])
    s.add_argument("--agent", default="claude", choices=["claude", "codex", "all"])
    s.add_argument(
        "--scope", choices=["project", "user"], default=None, help="default: project for Claude Code, user for Codex"
    )
    s.add_argument("--local", action="store_true", help="Claude Code: .claude/settings.local.json")
    s.add_argument("--project", metavar="DIR", help="project folder (default: the current folder)")
    s.add_argument("--home-dir", metavar="DIR", help=argparse.SUPPRESS)
    s.add_argument("--print", action="store_true", help="show the exact commands, write nothing")
    s.add_argument(
        "--no-mcp",
        action="store_true",
        help="hooks only: do not register (or remove) the MCP server of the recall tools",
    )
    s.set_defaults(func=cmd_hooks)

    s = sub.add_parser("hook", help="run one hook call (JSON on stdin); what the installed hooks call")
    s.add_argument("agent", choices=["claude", "codex"])
    s.set_defaults(func=cmd_hook)

    s = sub.add_parser("deliver", parents=[common], help="what an action would be handed (any agent, a git hook)")
    s.add_argument("--on", required=True, help="bash, write, edit, read, commit (comma-separated), boot or prompt")
    s.add_argument("--text", help="the action's text: the command, or the path and content")
    s.add_argument("--session", help="session id (withholding and carry-over are per session)")
    s.set_defaults(func=cmd_deliver)

    s = sub.add_parser("lint", parents=[common], help="every way a crystal can never fire or fires wrongly")
    s.add_argument("-v", "--verbose", action="store_true", help="also show info-level notes")
    s.set_defaults(func=cmd_lint)

    s = sub.add_parser("stats", parents=[common], help="the delivery figures from the ledger")
    s.add_argument("--days", type=float, help="window in days (default: all of the ledger)")
    s.set_defaults(func=cmd_stats)

    s = sub.add_parser("study", parents=[common], help="the control arm: delivered and withheld side by side")
    s.set_defaults(func=cmd_study)

    for name in EXTENSIONS:
        _register_extension(name, sub, common)
    if "reindex" not in sub.choices:
        s = sub.add_parser("reindex", parents=[common], help="rebuild the binding index from the files")
        s.set_defaults(func=cmd_reindex)
    return p


#: Command modules of the other rooms' issues. Each has ``register(sub, common)`` and imports
#: its heavy dependencies only inside the command functions.
EXTENSIONS = (
    "geode.cli.recall_cmds",
    "geode.cli.upkeep_cmds",
    "geode.cli.proposals_cmds",
    "geode.web.command",
    "geode.mcp.command",
)


def _register_extension(name: str, sub, common) -> None:
    import importlib

    importlib.import_module(name).register(sub, common)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except GeodeError as exc:  # every failure said for a person: one line and its status; a bug keeps its traceback
        print(f"geode: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
