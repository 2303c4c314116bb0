"""``geode deliver``, ``lint``, ``stats``, ``study``: what an action would be handed, and the
reports on the store and the ledger.

Apart from the set-up commands (``geode.cli.setup_cmds``) and the parser (``geode.cli.main``)
because they read the store and the ledger every day; the crystal registry ``stats`` counts
against is ``geode.services.crystals``, shared with the page's health view. Heavy imports happen
inside the command functions.
"""

from __future__ import annotations

import os
import sys
import time

from geode.kernel.errors import GeodeError
from geode.services.invocation import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, CLIError, engine_of, print_json, settings_of


# -- deliver -------------------------------------------------------------------------------
def cmd_deliver(args) -> int:
    from geode.delivery.control import MANUAL_SESSION_PREFIX
    from geode.delivery.engine import Delivery
    from geode.delivery.index import Index

    settings = settings_of(args)
    engine_of(settings)
    manual = not args.session
    if manual:  # a person trying a crystal: never withheld, and left out of stats and study
        settings = settings.replace(withhold_rate=0.0, withhold_rate_source="GEODE_WITHHOLD_RATE")
    idx = Index(settings, busy_ms=5000)
    try:
        idx.ensure()
        idx.refresh()
        d = Delivery(
            settings,
            args.session or f"{MANUAL_SESSION_PREFIX}{os.getpid()}-{int(time.time())}",
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
            # a write or edit's text is the hook's: the file's path on its first line, then the content;
            # the path is what a team rule's globs are matched against (geode.delivery.team_sync)
            path = args.text.split("\n", 1)[0].strip() if any(a in ("write", "edit") for a in actions) else ""
            res = d.act(actions, args.text, "commit" if "commit" in actions else actions[0], path, os.getcwd())
        d.flush()
        d.close()
    finally:
        idx.close()
    if args.json:
        print_json(res)
        return EXIT_OK
    held = [(kind, e) for kind in ("withheld", "skipped", "suppressed") for e in res[kind]]
    if res["text"]:
        print(res["text"], end="" if res["text"].endswith("\n") else "\n")
    elif held:
        print(f"(nothing handed over for {args.on}: {len(held)} matching crystal(s) held back, listed below)")
    else:
        print(f"(nothing bound to {args.on} matched)")
    for kind, e in held:  # on stdout: what was held back is part of the answer, not a diagnostic
        why = " by the control arm (geode study)" if kind == "withheld" else ""
        print(f"[{kind}{why}] {e['name']} ({e['domain']}/{e['path']}): {e.get('reason', '')}")
    if manual:
        print(
            "geode deliver: a manual call (no --session): never withheld, left out of stats and study",
            file=sys.stderr,
        )
    return EXIT_OK


# -- reports ------------------------------------------------------------------------------
def _term_shares(settings):
    """What share of the ledger's actions each term selected crystals on; None when the
    ledger cannot be read (lint then says so and checks everything else)."""
    from sqlalchemy.exc import SQLAlchemyError

    from geode.delivery.lint import ledger_term_shares

    if settings.records_file is not None and not os.path.exists(settings.records_file):
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


def _seen_agents(settings) -> set[str] | None:
    """The agent types in the ledger (lint's check of ``who``); None when it cannot be read
    (``_term_shares`` has said so already)."""
    from sqlalchemy.exc import SQLAlchemyError

    from geode.delivery.lint import ledger_agent_types

    if settings.records_file is not None and not os.path.exists(settings.records_file):
        return set()
    try:
        engine = engine_of(settings)
        try:
            with engine.connect() as conn:
                return ledger_agent_types(conn)
        finally:
            engine.dispose()
    except (GeodeError, SQLAlchemyError, OSError):
        return None


def cmd_lint(args) -> int:
    from geode.delivery.lint import lint_store

    settings = settings_of(args)
    shares = _term_shares(settings)
    r = lint_store(settings, term_shares=shares, seen_agents=_seen_agents(settings) if shares is not None else None)
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


def cmd_stats(args) -> int:
    from geode.evidence.stats import compute_stats, render_stats
    from geode.services.crystals import registered_crystals

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
    from geode.evidence.study import compute_study, render_study

    settings = settings_of(args)
    d = compute_study(settings, engine_of(settings))
    if args.json:
        print_json(d)
    else:
        print(render_study(d))
    return EXIT_OK
