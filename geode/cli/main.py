"""The command line's commands, registered in the order ``--help`` lists them, and ``geode run``.

Each command imports what it needs when it runs (SQLModel costs ~0.4 s to import), so
``geode hook`` and ``geode deliver`` stay quick. Every reporting command takes ``--json``;
the shapes are documented in README.md.

:func:`register` adds every command of the command line: ``run`` and the first-hour commands
here, the commands of ``geode.cli.setup_cmds`` (init, hooks, hook), ``geode.cli.delivery_cmds``
(deliver and the reports), ``geode.cli.recall_cmds``, ``geode.cli.upkeep_cmds`` and
``geode.cli.proposals_cmds``. The whole ``geode`` program (these and the page's and the MCP
server's commands) is put together above the surfaces, in ``geode.program``; :func:`main` here
runs the command line's commands alone (``python -m geode.cli`` and the agent's shell script
``geode/cli/command.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from geode.cli import proposals_cmds, recall_cmds, upkeep_cmds
from geode.cli.delivery_cmds import cmd_deliver, cmd_lint, cmd_stats, cmd_study
from geode.cli.setup_cmds import build_text_recall, cmd_hook, cmd_hooks, cmd_init, ensure_store, holds_files
from geode.services.commandline import build_program, run_program
from geode.services.invocation import EXIT_OK, EXIT_PROBLEMS, engine_of, settings_of
from geode.services.vector_build import describe, start_vector_build


# -- the main job ---------------------------------------------------------------------------
def cmd_run(parsers: Mapping[str, argparse.ArgumentParser], args: argparse.Namespace) -> int:
    """The embedded default end to end: a store (created with the starter set when there is
    none), one delivery shown as the agent would read it, lint, stats, and the upkeep run of
    the maintenance agents (in this process: the embedded default needs no server).

    ``parsers``: the program's subcommand parsers (bound by :func:`register`): lint, stats and
    upkeep run with what their own parsers make of ``--store``/``--home``, so their defaults
    live in one place."""
    settings = settings_of(args, creates_home=True)  # the main job creates the default store
    root = settings.domains[settings.default_domain]
    fresh = not holds_files(Path(root))  # never writes the starter set into a folder that holds files
    r = ensure_store(settings) if fresh else None
    if r is not None:
        settings = r["settings"]
        print(f"== created the default store at {r['store']} with {len(r['created'])} starter crystals")
        print(f"   recall index: {r['recall']['files']} notes (prompt-time recall is on)")
        vec = r["vectors"]
    else:
        had_md = any(Path(root).rglob("*.md"))
        print(
            f"== store {root}"
            + ("" if had_md else " (it holds files: indexed what is there, no starter notes written)")
        )
        recall = build_text_recall(settings)  # prompt-time recall reads it: kept in line with the files
        print(f"   recall index: {recall['files']} notes ({recall['added'] + recall['changed']} new or changed)")
        vec = start_vector_build(settings)  # detached: `run` does not wait for the model
    print(f"   vectors: {describe(vec)}")
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
    shared = _shared_argv(args)
    print("\n== geode lint")
    lint_rc = cmd_lint(parsers["lint"].parse_args(shared))
    print("\n== geode stats")
    cmd_stats(parsers["stats"].parse_args(shared))
    upkeep_rc = _run_upkeep(parsers, shared)
    if not res["delivered"]:
        print(
            "\nerror: the demonstration delivered nothing; the store has no crystal bound to this command",
            file=sys.stderr,
        )
        return EXIT_PROBLEMS
    return lint_rc or upkeep_rc


def _shared_argv(args: argparse.Namespace) -> list[str]:
    """This invocation's ``--store``/``--home``, as the arguments another command is given."""
    argv: list[str] = []
    for flag, value in (("--store", args.store), ("--home", args.home)):
        if value is not None:
            argv += [flag, value]
    return argv


def _run_upkeep(parsers: Mapping[str, argparse.ArgumentParser], shared: list[str]) -> int:
    """The maintenance agents, in this process: what they examined, found and proposed."""
    if "upkeep" not in parsers:
        return EXIT_OK
    print("\n== geode upkeep (in this process; proposals wait for a person: geode proposals list)")
    return upkeep_cmds.cmd_upkeep(parsers["upkeep"].parse_args(["--in-process", *shared]))


# -- registration --------------------------------------------------------------------------
def register(sub, common) -> None:
    """Every command of the command line, in the order ``--help`` lists them."""
    s = sub.add_parser(
        "run",
        parents=[common],
        help="the main job on the embedded default: store, recall index, a delivery, lint, stats, "
        "and one upkeep run of the maintenance agents",
    )
    s.add_argument(
        "--command", default="npm run build 2>&1 | tail -20", help="the shell command to show a delivery for"
    )
    s.set_defaults(func=partial(cmd_run, sub.choices))

    s = sub.add_parser("init", parents=[common], help="create GEODE_HOME, geode.toml and a store with the starter set")
    s.add_argument("store_dir", nargs="?", help="create the store here instead (a one-off store)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--empty", action="store_true", help="no starter crystals")
    g.add_argument(
        "--demo",
        action="store_true",
        help="the starter set plus a few notes with real problems for upkeep to find (the tour's queue)",
    )
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("hooks", parents=[common], help="install or remove the agent hooks and the MCP server")
    s.add_argument("action", choices=["install", "uninstall"], help="install (or refresh) or remove")
    s.add_argument(
        "--agent", default="claude", choices=["claude", "codex", "all"], help="which agent's hooks (default claude)"
    )
    s.add_argument(
        "--scope",
        choices=["local", "project", "user"],
        default=None,
        help="local (default): files nobody commits, Claude Code's .claude/settings.local.json and its "
        "local MCP scope in ~/.claude.json, Codex's ~/.codex; project: the files a team commits "
        "(.claude/settings.json, .mcp.json), which then hold this machine's absolute paths; user: ~/.claude, ~/.codex",
    )
    s.add_argument("--local", action="store_true", help="the same as --scope local (kept for old scripts)")
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
    s.add_argument("agent", choices=["claude", "codex"], help="the agent whose hook event is on stdin")
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

    recall_cmds.register(sub, common)  # search, context, read, recent, reindex, status, serve
    upkeep_cmds.register(sub, common)
    proposals_cmds.register(sub, common)


def build_parser() -> argparse.ArgumentParser:
    """The command line's commands alone (the whole program: ``geode.program.main``)."""
    return build_program([register])


def main(argv: list[str] | None = None) -> int:
    """The command line's commands, run as the ``geode`` program runs them."""
    return run_program(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
