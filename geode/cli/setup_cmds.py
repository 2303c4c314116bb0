"""``geode init``, ``geode hooks install|uninstall`` and ``geode hook``: setting geode up for a
person and an agent (GEODE_HOME, ``geode.toml``, the starter store; the hooks and the MCP server
registered; the hook run by hand).

Apart from the everyday commands because they run once per machine or project and write outside
the store (the agents' config files). Heavy imports happen inside the command functions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import sys
from pathlib import Path

from geode.kernel.config import Settings, load_settings
from geode.services.invocation import EXIT_OK, CLIError, engine_of, print_json, settings_of

STARTER_DIR = Path(__file__).resolve().parent.parent / "delivery" / "starter"
#: ``geode init --demo``: honest notes, each with a problem the upkeep agents find by their own
#: rules (its README.txt says which), so a new user's queue has proposals to approve and undo
DEMO_DIR = STARTER_DIR / "demo"


# -- init -----------------------------------------------------------------------------
def write_default_config(settings: Settings, store_root: str) -> Path:
    """``geode.toml`` with the control plan fixed now, before any data exists."""
    path = Path(settings.config_path)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    stop = (dt.date.today() + dt.timedelta(days=90)).isoformat()
    # a store folder that holds notes already may have been written for the substring rule
    root = Path(store_root).expanduser()
    rule = "substring" if root.is_dir() and next(iter(root.rglob("*.md")), None) is not None else "tokens"
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
        "block_lookups = true\n"
        '# the rule the store\'s match terms were written for: "tokens" (a store begun with token-aware\n'
        '# matching) or "substring" (one from before it: geode lint names what each term lost;\n'
        "# README, 'Migrating from substring matching')\n"
        f'terms_written_for = "{rule}"\n\n'
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


def holds_files(root: Path) -> bool:
    """Whether the folder already holds any file (at any depth, hidden ones too: a folder of
    ``.cursor/rules/*.mdc`` or a bare ``.git`` is someone's): the starter set is never written
    into it; what is there is indexed instead. A loop, not ``os.walk`` (recursive on 3.11), so a
    folder nested a thousand deep is answered, not a ``RecursionError``; a folder it cannot enter
    counts as holding files (it is someone's)."""
    import os

    if not root.is_dir():
        return False
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        return True
        except OSError:
            return True
    return False


def ensure_store(settings: Settings, with_starter: bool = True, demo: bool = False) -> dict:
    """Create the config, the store with the starter set (never overwriting, and never into a
    folder that already holds files), the ledger, the index. ``demo``: the demo notes too, under
    the same rule."""
    from geode.delivery.index import Index

    created = []
    if not settings.one_off_store:
        write_default_config(settings, settings.domains[settings.default_domain])
        settings = _reload(settings)
    root = Path(settings.domains[settings.default_domain])
    existing = holds_files(root)
    root.mkdir(parents=True, exist_ok=True)
    if with_starter and not existing:
        sources = sorted(STARTER_DIR.glob("*.md")) + (sorted(DEMO_DIR.glob("*.md")) if demo else [])
        for src in sources:
            dest = root / src.name
            if not dest.exists():
                shutil.copyfile(src, dest)
                if src.name == AGENT_NOTE:
                    _point_at_this_install(dest, settings)
                created.append(src.name)
    engine_of(settings)
    idx = Index(settings, busy_ms=5000)
    try:
        idx.build()
        counts = idx.counts()
    finally:
        idx.close()
    recall = build_text_recall(settings)
    from geode.services.vector_build import start_vector_build

    vectors = start_vector_build(settings)  # detached: the command does not wait for the model
    return {
        "settings": settings,
        "store": str(root),
        "created": created,
        "existing": existing,
        "index": counts,
        "recall": recall,
        "vectors": vectors,
    }


def build_text_recall(settings: Settings) -> dict:
    """The recall index's full text, brought in line with the files: what prompt-time recall (the
    UserPromptSubmit hook) and ``geode search`` read. Without it the hook hands over nothing and
    says nothing, so ``init`` and ``run`` build it; the vectors follow in the background
    (``geode.services.vector_build``), and search works on text alone until they land."""
    from geode.recall.recall_index import RecallIndex

    rc = RecallIndex(settings).refresh()
    rc["problems"] = len(rc.pop("problems"))
    return rc


#: The starter note that tells the agent how to ask geode; written with the command that works
#: in the agent's shell (``_point_at_this_install``).
AGENT_NOTE = "geode-memory-in-this-project.md"


def _point_at_this_install(note: Path, settings: Settings) -> None:
    """Replace the bare `` `geode `` of the starter note by the absolute command an agent's shell
    can run (the hooks' interpreter and ``geode/cli/command.py``, ``GEODE_HOME=`` in front for a
    home that is not the default): the agent's shell often lacks the venv on PATH."""
    from geode.delivery.guard import agent_command
    from geode.install.hooks import default_home_dir

    home = None
    if Path(settings.home).expanduser().resolve() != default_home_dir().resolve():
        home = str(Path(settings.home).expanduser().resolve())
    text = note.read_text(encoding="utf-8")
    note.write_text(text.replace("`geode ", f"`{agent_command(home=home)} "), encoding="utf-8")


def _reload(settings: Settings) -> Settings:
    return load_settings(home=settings.home) if not settings.one_off_store else settings


def cmd_init(args) -> int:
    from geode.services.vector_build import describe

    settings = settings_of(args, store_must_exist=False)  # creating the store is init's job
    if args.store_dir:
        settings = load_settings(store=args.store_dir, home=args.home)
    demo = bool(getattr(args, "demo", False))
    r = ensure_store(settings, with_starter=not args.empty, demo=demo)
    out = {
        "home": r["settings"].home,
        "store": r["store"],
        "starter_written": r["created"],
        "store_had_files": r["existing"],
        "index": r["index"],
        "recall": r["recall"],
        "vectors": r["vectors"],
        "config": r["settings"].config_path,
        "demo": sorted(p.name for p in DEMO_DIR.glob("*.md") if p.name in r["created"]) if demo else [],
    }
    if args.json:
        print_json(out)
    else:
        print(f"geode home  {out['home']}")
        if out["demo"]:
            print(
                f"store       {out['store']}  ({len(r['created']) - len(out['demo'])} starter crystals and "
                f"{len(out['demo'])} demo notes with problems for upkeep written)"
            )
        elif r["created"]:
            print(f"store       {out['store']}  ({len(r['created'])} starter crystals written)")
        elif r["existing"]:
            print(f"store       {out['store']}  (already holds files: indexed what is there, no starter notes written)")
        elif args.empty:
            print(f"store       {out['store']}  (no starter crystal written: --empty)")
        else:
            print(f"store       {out['store']}  (no starter crystal written)")
        print(f"index       {r['index']['crystals']} crystals in {r['index']['files']} note files")
        print(f"recall      {r['recall']['files']} notes in the text index (prompt-time recall is on)")
        print(f"vectors     {describe(r['vectors'])}")
        if out["demo"]:
            print("next        geode upkeep          (then: geode proposals list; geode proposals approve ID)")
        else:
            print("next        geode hooks install   (then: geode deliver --on bash --text 'npm test | tail')")
    return EXIT_OK


# -- hooks -------------------------------------------------------------------------------
def cmd_hooks(args) -> int:
    from geode.install import hooks as inst
    from geode.install import mcp as im
    from geode.install.files import InstallError
    from geode.install.mcp_entry import mcp_entry
    from geode.install.probe import verify_mcp_entry

    settings = settings_of(args)
    results = []
    mcp = not args.no_mcp  # the recall tools' server is registered beside the hooks (geode mcp)
    try:
        agents = inst.resolve_agents(args.agent)
        # settings.home: --home, then GEODE_HOME, then ~/.geode (the flag wins, as everywhere)
        home, store = settings.home, args.store if args.store else None
        if args.action == "install" and not args.print and mcp:  # before anything is written
            verify_mcp_entry(mcp_entry(home=home, store=store))
        scope = "local" if args.local else (args.scope or inst.LOCAL_SCOPE)
        for agent in agents:
            kw = dict(scope=scope, project=args.project or os.getcwd(), local=False, home_dir=args.home_dir)
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
            verb = "already in" if r.get("unchanged") else "written to"
            print(f"{r['agent']}: hooks {verb} {r['path']} ({scope_words(r['agent'], scope)}): {state}")
            if r.get("notice"):
                print(f"  {r['notice']}")
            if r.get("gitignore"):
                print(f"  added {Path(r['path']).name} to {r['gitignore']}: it holds this machine's paths")
            if m:
                what = "unchanged" if m["unchanged"] else ("replaced" if m["replaced"] else "added")
                print(f"{r['agent']}: MCP server {m['name']!r} {what} in {m['path']}")
                if m.get("notice"):
                    print(f"  {m['notice']}")
            if inst.shared_scope(r["agent"], scope):
                print(
                    f"warning: {r['path']}"
                    + (f" and {m['path']}" if m else "")
                    + " are the project's shared files, usually committed, and now hold this machine's absolute "
                    "paths (the interpreter, hookmain.py, GEODE_HOME); on another machine they point nowhere. "
                    "Keep them out of the commit, or install with the default --scope local.",
                    file=sys.stderr,
                )
        else:
            print(f"{r['agent']}: {r['path']}: removed {r.get('removed', 0)} geode hook(s)")
            if m:
                print(
                    f"{r['agent']}: {m['path']}: removed {m['removed']} MCP server entry"
                    + (f" (kept: {m['kept']})" if m.get("kept") else "")
                )
    return EXIT_OK


_SCOPE_WORDS = {
    "local": "local scope: this project on this machine, not committed",
    "project": "project scope: the project's shared file",
    "user": "user scope: every project of this user",
}


def scope_words(agent: str, scope: str) -> str:
    """What a scope means for this agent, in words: Codex has no per-project file that stays out
    of a commit, so its local scope is the user's own file (saying "this project" would be wrong)."""
    if agent == "codex" and scope in ("local", "user"):
        return f"{scope} scope: your own ~/.codex, every project of this user, in no repository"
    return _SCOPE_WORDS[scope]


def _precompile() -> None:
    """Byte-compile the hook's modules: with PYTHONDONTWRITEBYTECODE set (common in agent
    shells) an uncompiled hook recompiles every module on every tool call (~10 ms)."""
    import compileall

    from geode.delivery.hookmain import HOOK_ROOMS

    pkg = Path(__file__).resolve().parent.parent
    compileall.compile_file(str(pkg / "__init__.py"), quiet=1)
    for room in HOOK_ROOMS:
        compileall.compile_dir(str(pkg / room), quiet=1)


def cmd_hook(args) -> int:
    from geode.delivery import hookmain

    return hookmain.main([args.agent])
