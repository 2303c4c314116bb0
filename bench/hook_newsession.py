"""The act hook with a new session per call (as agents really run), and in an aged home (issue 25).

Per store size (the ``hook_speed`` generator with ``--common``: a command that matches that
many crystals, reused from ``bench/out/stores/``): a fresh home and an aged one (``--aged``
sessions of history in the binding index's per-session table, then pruned the way the nightly
upkeep prunes it, where the code has ``Index.prune_sessions``). Interleaved rounds time whole
processes: ``python -c pass``, the installed hook in the fresh home, the hook in the aged home,
each hook call with a session id never seen before. Wall (median) and CPU (median of the
child's user+system time, from ``wait4``) as ratios to ``python -c pass`` in the same run.

``--before TREE`` (a checkout of other code, e.g. ``git worktree add /tmp/before main``) adds
that code's hook in its own fresh and aged homes as two more arms of the same interleaved
rounds, so before and after meet the same load. The aged home gets a copy of the fresh home's
index (the same store and code build the same index) instead of a second build.

Run: ``nice PYTHONPATH=. .venv/bin/python bench/hook_newsession.py --sizes 10000 --common 240``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench import hook_speed as hs  # noqa: E402 - after the path is set


def _timed(cmd: str, stdin: bytes, env: dict, cwd: str) -> tuple[float, float, bytes]:
    """(wall ms, CPU ms of the child and its children, stdout)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        ["/bin/sh", "-c", cmd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    out, _ = p.communicate(stdin)
    wall = (time.perf_counter() - t0) * 1000
    return wall, _rusage_children(), out


_LAST = [0.0]


def _rusage_children() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (r.ru_utime + r.ru_stime) * 1000
    delta = total - _LAST[0]
    _LAST[0] = total
    return delta


def _event(command: str, cwd: str) -> bytes:
    data = json.loads(hs.event_json(command, cwd))
    data["session_id"] = f"bench-{uuid.uuid4().hex}"  # a new session per call
    return json.dumps(data).encode()


_BUILD = (
    "import sys; from geode.delivery.index import Index; from geode.kernel.config import load_settings; "
    "s = load_settings(home=sys.argv[1], env={'GEODE_HOME': sys.argv[1]}); i = Index(s, busy_ms=60000); "
    "i.ensure(); i.close()"
)


def _home(root: str, tmp: str, name: str, tree: str = REPO, index_from: str | None = None):
    """A home on ``root`` whose binding index ``tree``'s code built (in a child, so that another
    checkout's code builds its own index version), or a copy of ``index_from``'s."""
    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    home = os.path.join(tmp, name)
    os.makedirs(home)
    with open(os.path.join(home, "geode.toml"), "w", encoding="utf-8") as fh:
        fh.write(f"[domains]\nmain = {json.dumps(root)}\n")
    settings = load_settings(home=home, env={"GEODE_HOME": home, "GEODE_WITHHOLD_RATE": "0"})
    if index_from is not None:  # the binding index files only (not the settings cache, keyed by its home)
        src = os.path.join(index_from, "index")
        os.makedirs(os.path.join(home, "index"), exist_ok=True)
        for name in os.listdir(src):
            if name.startswith("bindings-"):
                shutil.copy2(os.path.join(src, name), os.path.join(home, "index", name))
    else:
        env = {**os.environ, "PYTHONPATH": tree, "GEODE_HOME": home}
        subprocess.run([sys.executable, "-c", _BUILD, home], check=True, cwd=tree, env=env)
    init_db(settings).dispose()
    return home, settings


def _age(settings, sessions: int) -> dict:
    """``sessions`` of history as hook calls leave it (a start mark, counts, a command, 6 matched
    crystals' state), 30 days old; then the prune where the code has one."""
    from geode.delivery.index import Index, index_path

    db = index_path(settings)
    conn = sqlite3.connect(db)
    ts = time.time() - 30 * 86400
    rows = []
    for i in range(sessions):
        s = f"aged-{i:06d}"
        rows += [(s, "start", "t", ts, 0), (s, "actions", "bash", ts, 4), (s, "cmd", "git commit", ts, 2)]
        rows += [(s, "delivered", f"main:x/{i % 997}/{k}.md", ts, 0) for k in range(6)]
        rows += [(s, "pending", f"main:y/{i % 991}/{k}.md", ts, 0) for k in range(4)]
        if len(rows) > 100_000:
            conn.executemany("INSERT OR IGNORE INTO sess(session, kind, item, ts, n) VALUES(?,?,?,?,?)", rows)
            rows = []
    conn.executemany("INSERT OR IGNORE INTO sess(session, kind, item, ts, n) VALUES(?,?,?,?,?)", rows)
    conn.commit()
    before = conn.execute("SELECT COUNT(*) FROM sess").fetchone()[0]
    conn.close()
    idx = Index(settings, busy_ms=10_000)
    pruned = None
    try:
        if hasattr(idx, "prune_sessions"):
            pruned = idx.prune_sessions()
    finally:
        idx.close()
    conn = sqlite3.connect(db)
    after = conn.execute("SELECT COUNT(*) FROM sess").fetchone()[0]
    if pruned:
        conn.execute("VACUUM")
    conn.close()
    return {"sess_rows_before": before, "sess_rows_after": after, "sessions_pruned": pruned}


def bench(n: int, args) -> dict:
    from geode.install import hooks as install

    m = hs.generate_store(n, args.seed, 1, args.common)
    tmp = tempfile.mkdtemp(prefix=f"geode-newsess-{n}-")
    try:
        cwd = os.path.join(tmp, "project")
        os.makedirs(cwd)
        fresh_home, _fs = _home(m["root"], tmp, "fresh")
        aged_home, aged_s = _home(m["root"], tmp, "aged", index_from=fresh_home)
        aged = _age(aged_s, args.aged)
        py = sys.executable
        arms = {
            "python -c pass": (f"{py} -c pass", None, hs.hook_env(fresh_home)),
            "hook, fresh home": (install.hook_command("claude", home=fresh_home), True, hs.hook_env(fresh_home)),
            "hook, aged home": (install.hook_command("claude", home=aged_home), True, hs.hook_env(aged_home)),
        }
        if args.before:
            tree = os.path.abspath(args.before)
            entry = os.path.join(tree, "geode", "delivery", "hookmain.py")
            b_fresh, _bs = _home(m["root"], tmp, "before-fresh", tree=tree)
            b_aged, b_aged_s = _home(m["root"], tmp, "before-aged", index_from=b_fresh)
            aged["before"] = _age(b_aged_s, args.aged)
            for label, home in (("before: hook, fresh home", b_fresh), ("before: hook, aged home", b_aged)):
                arms[label] = (install.hook_command("claude", hookmain=entry, home=home), True, hs.hook_env(home))
        wall: dict[str, list[float]] = {k: [] for k in arms}
        cpu: dict[str, list[float]] = {k: [] for k in arms}
        names = list(arms)
        delivered = []
        for r in range(args.warmup + args.runs):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                cmd, hook, env = arms[name]
                stdin = _event(hs.COMMON_COMMAND, cwd) if hook else b""
                _rusage_children()
                w, c, out = _timed(cmd, stdin, env, cwd)
                if hook:
                    ctx = json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""
                    if not ctx:
                        raise hs.BenchFailure(f"[{n:,}] {name}: the hook delivered nothing")
                    delivered.append(ctx.count("\n◆ ") or ctx.count("◆"))
                if r >= args.warmup:
                    wall[name].append(w)
                    cpu[name].append(c)
        with sqlite3.connect(os.path.join(fresh_home, "geode.db")) as con:
            rows = con.execute("SELECT COUNT(*) FROM ledger_event").fetchone()[0]
        if args.before:
            with sqlite3.connect(os.path.join(b_fresh, "geode.db")) as con:
                b_rows = con.execute("SELECT COUNT(*) FROM ledger_event").fetchone()[0]
        base_w = statistics.median(wall["python -c pass"])
        base_c = statistics.median(cpu["python -c pass"])
        res = {"crystals": n, "common": args.common, "runs": args.runs, "aged": aged, "ledger_rows_fresh": rows}
        res["arms"] = {
            k: {
                "wall_ms": round(statistics.median(wall[k]), 2),
                "cpu_ms": round(statistics.median(cpu[k]), 2),
                "wall_x": round(statistics.median(wall[k]) / base_w, 2),
                "cpu_x": round(statistics.median(cpu[k]) / base_c, 2),
            }
            for k in arms
        }
        res["rows_per_call"] = round(rows / (args.warmup + args.runs), 1)
        res["aged_over_fresh_cpu"] = round(
            statistics.median(cpu["hook, aged home"]) / statistics.median(cpu["hook, fresh home"]), 3
        )
        res["aged_over_fresh_wall"] = round(
            statistics.median(wall["hook, aged home"]) / statistics.median(wall["hook, fresh home"]), 3
        )
        if args.before:
            res["before_rows_per_call"] = round(b_rows / (args.warmup + args.runs), 1)
            for what, series in (("cpu", cpu), ("wall", wall)):
                res[f"before_aged_over_fresh_{what}"] = round(
                    statistics.median(series["before: hook, aged home"])
                    / statistics.median(series["before: hook, fresh home"]),
                    3,
                )
        res["loadavg"] = _loadavg()
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _loadavg() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--common", type=int, default=240, help="crystals the command matches")
    ap.add_argument("--aged", type=int, default=50_000, help="sessions of history in the aged home")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out")
    ap.add_argument("--before", help="another checkout whose hook runs as more arms of the same rounds")
    args = ap.parse_args(argv)
    import compileall

    from geode.delivery.hookmain import HOOK_ROOMS

    for tree in [REPO] + ([os.path.abspath(args.before)] if args.before else []):
        for room in HOOK_ROOMS:
            if not compileall.compile_dir(os.path.join(tree, "geode", room), quiet=1, maxlevels=0):
                raise SystemExit(f"cannot byte-compile {tree}/geode/{room}")
        compileall.compile_file(os.path.join(tree, "geode", "__init__.py"), quiet=1)
    load0 = _loadavg()
    results = [bench(int(s.replace("_", "")), args) for s in args.sizes.split(",") if s.strip()]
    print(f"code: {REPO}; {hs.machine()}; command {hs.COMMON_COMMAND!r}; new session per call; {args.runs} rounds")
    if args.before:
        print(f"before: {os.path.abspath(args.before)}")
    print(f"load average at the start: {load0}; after each size: {[r['loadavg'] for r in results]}")
    print("| crystals | arm | wall ms | CPU ms | wall x | CPU x |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for r in results:
        for k, a in r["arms"].items():
            print(f"| {r['crystals']:,} | {k} | {a['wall_ms']} | {a['cpu_ms']} | {a['wall_x']} | {a['cpu_x']} |")
    for r in results:
        print(
            f"[{r['crystals']:,}] aged/fresh CPU {r['aged_over_fresh_cpu']}, wall {r['aged_over_fresh_wall']}; "
            f"aged home {r['aged']}; ledger rows per call {r['rows_per_call']}"
        )
        if args.before:
            print(
                f"[{r['crystals']:,}] before: aged/fresh CPU {r['before_aged_over_fresh_cpu']}, "
                f"wall {r['before_aged_over_fresh_wall']}; ledger rows per call {r['before_rows_per_call']}"
            )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
