"""The ``geode`` command line. Settings are read once here and passed down.

Each command imports what it needs when it runs (SQLModel costs ~0.4 s to import), so
``geode hook`` and ``geode deliver`` stay quick. Every reporting command takes ``--json``;
the shapes are documented in README.md.

This module holds the parser, ``geode run`` and the entry point; the commands live in
``geode.cli.setup_cmds`` (init, hooks, hook), ``geode.cli.delivery_cmds`` (deliver and the
reports) and the modules named in :data:`EXTENSIONS`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from geode.cli.background import describe, start_vector_build
from geode.cli.common import EXIT_OK, EXIT_PROBLEMS, engine_of, machine_failure, records_location, settings_of
from geode.cli.delivery_cmds import cmd_deliver, cmd_lint, cmd_reindex, cmd_stats, cmd_study
from geode.cli.setup_cmds import build_text_recall, cmd_hook, cmd_hooks, cmd_init, ensure_store, holds_files
from geode.kernel.errors import GeodeError


# -- the main job ---------------------------------------------------------------------------
def cmd_run(args) -> int:
    """The embedded default end to end: a store (created with the starter set when there is
    none), one delivery shown as the agent would read it, lint, stats, and the upkeep run of
    the maintenance agents (in this process: the embedded default needs no server)."""
    settings = settings_of(args)
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

    p = argparse.ArgumentParser(
        prog="geode",
        description="Crystal memory for coding agents. The shared options --store DIR, --home DIR and "
        "--json may be given before COMMAND as well as after it.",
    )
    sub = p.add_subparsers(dest="command_name", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser(
        "run",
        parents=[common],
        help="the main job on the embedded default: store, recall index, a delivery, lint, stats, "
        "and one upkeep run of the maintenance agents",
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


#: The status of a command whose reader went away (``geode run | head``): 128 + SIGPIPE, what
#: the shell reports for a Unix tool ended by that signal.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    """Parse, run one command, say any ``GeodeError`` in one line. A closed pipe on stdout
    (``| head``) ends the command quietly, as Unix tools end, instead of in a traceback."""
    try:
        rc = _dispatch(argv)
        sys.stdout.flush()  # a pipe closed early fails here, inside the handler, not at exit
        return rc
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _dispatch(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(_store_first(argv if argv is not None else sys.argv[1:]))
    try:
        return int(args.func(args) or 0)
    except GeodeError as exc:  # every failure said for a person: one line and its status; a bug keeps its traceback
        print(f"geode: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the machine's failures (a corrupt or read-only database...) in one line
        said = machine_failure(exc, records_location(args))
        if said is None:
            raise
        print(f"geode: {said}", file=sys.stderr)
        return said.exit_code


#: The options every command shares, which may also come before the command's name.
_SHARED_WITH_VALUE = ("--store", "--home")
_SHARED_FLAGS = ("--json",)


def _store_first(argv: list[str]) -> list[str]:
    """``geode --store DIR search x`` as ``geode search x --store DIR``: the shared options given
    before the command's name move to the end, where the command's own parser (nested ones such
    as ``proposals list`` included) reads them."""
    lead: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _SHARED_WITH_VALUE and i + 1 < len(argv):
            lead += argv[i : i + 2]
            i += 2
        elif a.startswith(tuple(o + "=" for o in _SHARED_WITH_VALUE)) or a in _SHARED_FLAGS:
            lead.append(a)
            i += 1
        else:
            break
    if not lead or i >= len(argv) or "--" in argv[i:]:
        return list(argv)
    return [*argv[i:], *lead]


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush at exit has nowhere to fail
    (the Python documentation's recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (a test's StringIO)
        pass


if __name__ == "__main__":
    sys.exit(main())
