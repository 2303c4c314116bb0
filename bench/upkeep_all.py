"""All four upkeep agents on generated stores of 10,000 and 100,000 notes with a generated
ledger of 1,000,000 rows: time, peak memory and the proposals each one makes.

Each agent runs through ``geode.agents.upkeep.run_agent`` (examine, the census, findings stored,
proposals filed in the SQLite approval queue) in a fresh process of its own, so its peak
resident memory (``ru_maxrss``) is its run alone. An agent whose module is not installed is
reported as ``missing``, never left out.

The store: folders of 500 notes with frontmatter, wikilinks to the next and previous note and
a markdown link across folders (1 in 100 broken); 1 note in 10 is a crystal bound to bash
with its own term. The ledger (60 days, sessions of 20 rows): deliveries of a third of the
crystals (the rest never fire), withholdings, budget skips, blocked lookups grepping for one
of 400 topics (a command in ``detail``), marked lookups, searches finding notes, session ends.

    .venv/bin/python bench/upkeep_all.py              # 10,000 and 100,000 notes; writes bench/UPKEEP_ALL.md
    .venv/bin/python bench/upkeep_all.py 2000 50000   # other sizes (notes, ledger rows), printed only
    .venv/bin/python bench/upkeep_all.py 20000 1000000 --agents cleaner,gardener   # some agents only
    .venv/bin/python bench/upkeep_all.py 100000 1000000 --code /tmp/base   # another tree's geode/
                                                      # (a baseline: git archive REV geode | tar -x -C /tmp/base)
"""

from __future__ import annotations

import json
import os
import platform
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the tree whose ``geode`` package is measured (``--code``; the agents' processes inherit it)
CODE = Path(os.environ.get("GEODE_BENCH_CODE") or REPO)
PER_FOLDER = 500
DAY = 86400.0
LEDGER_ROWS = 1_000_000
AGENTS = ("librarian", "cleaner", "gardener", "corrector")


def note_path(i: int) -> str:
    return f"area-{i // PER_FOLDER:03d}/note-{i:06d}.md"


def generate_store(root: Path, n: int) -> None:
    for f in range((n + PER_FOLDER - 1) // PER_FOLDER):
        (root / f"area-{f:03d}").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        nxt = f"note-gone-{i:06d}" if i % 100 == 50 else f"note-{(i + 1) % n:06d}"
        other = (i + 7 * PER_FOLDER + 3) % n
        fm = ["---", f"title: Note {i}", "type: fact", "tags: [bench]"]
        if i % 10 == 0:
            fm += ["crystal:", "  deliver: act", "  on: bash", f'  match: "cmd-{i:06d}"', "  who: all"]
        fm.append("---")
        body = [f"# Note {i}", ""]
        if i % 10 == 0:
            body += [
                "<!-- crystal:essence -->",
                f"Before cmd-{i:06d}, check the thing numbered {i}.",
                "<!-- /crystal:essence -->",
                "",
            ]
        body += [
            "## Details",
            f"Something worth knowing, number {i}.",
            f"Next: [[{nxt}]]. Previous: [[note-{(i - 1) % n:06d}|the one before]].",
            f"See also [note {other}](../{note_path(other)}#details).",
        ]
        (root / note_path(i)).write_text("\n".join(fm + body) + "\n", encoding="utf-8")
    old = time.time() - 120 * DAY  # older than the ledger: the never-fired rule may judge them
    for dirpath, _d, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(dirpath, name), (old, old))


def generate_ledger(db: str, root: str, domain: str, n_notes: int, rows: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    crystals = list(range(0, n_notes, 10))
    firing = crystals[: max(1, len(crystals) // 3)]
    topics = [f"topic{k:03d}" for k in range(400)]
    end = time.time() - DAY
    start = end - 60 * DAY
    kinds_mix = (
        ["delivered"] * 60
        + ["withheld"] * 8
        + ["skipped_budget"] * 5
        + ["blocked"] * 8
        + ["lookup_marked"] * 2
        + ["searched"] * 12
        + ["session_end"] * 5
    )
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    from geode.delivery.ledger import COLUMNS

    cols = COLUMNS[1:]  # the ledger's own column list, less the row id
    sql = f"INSERT INTO ledger_event ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
    batch = []
    counts: dict[str, int] = {}
    for r in range(rows):
        session = f"sess-{r // 20:06d}"
        ts = start + (end - start) * r / rows
        kind = rng.choice(kinds_mix)
        counts[kind] = counts.get(kind, 0) + 1
        cid = path = term = detail = ""
        action, channel = "bash", "act"
        if kind in ("delivered", "withheld", "skipped_budget"):
            i = rng.choice(firing)
            path = note_path(i)
            cid, term = f"{domain}:{path}", f"cmd-{i:06d}"
        elif kind in ("blocked", "lookup_marked"):
            t = rng.choice(topics)
            action, channel, term = "grep", "guard", "grep"
            detail = json.dumps({"tool": "Bash", "what": "grep", "command": f"grep -rn {t} {root}"})
        elif kind == "searched":
            hits = [f"{domain}:{note_path(rng.randrange(n_notes))}" for _ in range(3)]
            action, channel = "search", "rag"
            detail = json.dumps({"query": f"how to {rng.choice(topics)}", "hits": hits})
        else:
            action, channel = "session", ""
        batch.append(
            (
                os.urandom(16).hex(),
                ts,
                kind,
                session,
                domain,
                cid,
                path,
                "",
                action,
                channel,
                term,
                100 if kind == "delivered" else 0,
                0,
                "main",
                detail,
            )
        )
        if len(batch) >= 20000:
            conn.executemany(sql, batch)
            conn.commit()
            batch = []
    if batch:
        conn.executemany(sql, batch)
        conn.commit()
    conn.close()
    return counts


def prepare(n: int, rows: int, workdir: str) -> dict:
    sys.path.insert(0, str(CODE))
    from geode.agents.contract import ensure_tables
    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    root = Path(workdir) / "store"
    t = time.perf_counter()
    generate_store(root, n)
    gen_store_s = time.perf_counter() - t
    settings = load_settings(store=root, home=Path(workdir) / "home", env={})
    engine = init_db(settings)
    ensure_tables(engine)
    from geode.queue.tables import ensure_tables as queue_tables

    queue_tables(engine)
    engine.dispose()
    t = time.perf_counter()
    counts = generate_ledger(str(settings.records_file), str(root), settings.default_domain, n, rows)
    return {
        "generate_store_s": round(gen_store_s, 1),
        "generate_ledger_s": round(time.perf_counter() - t, 1),
        "ledger_kinds": counts,
    }


def run_one(name: str, workdir: str) -> dict:
    sys.path.insert(0, str(CODE))
    from geode.agents import upkeep
    from geode.agents.upkeep import run_agent
    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    settings = load_settings(store=Path(workdir) / "store", home=Path(workdir) / "home", env={})
    have, _missing = upkeep.available(settings)
    if name not in have:
        return {"agent": name, "status": "missing", "reason": f"{upkeep.BUILTIN[name]} is not installed"}
    engine = init_db(settings, drain=False)
    t = time.perf_counter()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    report = run_agent(settings, engine, f"bench-{name}", name)
    secs = time.perf_counter() - t
    cpu2 = resource.getrusage(resource.RUSAGE_SELF)
    kinds: dict[str, int] = {}
    for p in report.proposals:
        kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
    fk: dict[str, int] = {}
    for f in report.findings:
        fk[f.kind] = fk.get(f.kind, 0) + 1
    return {
        "agent": name,
        "status": report.status,
        "seconds": round(secs, 2),
        "cpu_seconds": round(cpu2.ru_utime + cpu2.ru_stime - cpu.ru_utime - cpu.ru_stime, 2),  # user + sys
        "load_average": [round(x, 2) for x in os.getloadavg()],  # at the end: the machine's other work
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "examined_notes": report.examined.get("notes", 0),
        "findings": fk,
        "proposals": kinds,
        "message": report.message[:300],
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--prepare"]:
        print(json.dumps(prepare(int(argv[1]), int(argv[2]), argv[3])))
        return 0
    if argv[:1] == ["--agent"]:
        print(json.dumps(run_one(argv[1], argv[2])))
        return 0
    agents = list(AGENTS)
    code = CODE
    args: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--agents":
            agents = [x for x in next(it).split(",") if x]
            unknown = sorted(set(agents) - set(AGENTS))
            if unknown:
                print(f"unknown agent(s): {', '.join(unknown)}; known: {', '.join(AGENTS)}", file=sys.stderr)
                return 2
        elif a == "--code":
            code = Path(next(it)).resolve()
        else:
            args.append(a)
    partial = len(args) >= 2 or agents != list(AGENTS) or code != REPO
    sizes = [(int(args[0]), int(args[1]))] if len(args) >= 2 else [(10_000, LEDGER_ROWS), (100_000, LEDGER_ROWS)]
    env = dict(os.environ, PYTHONPATH=str(code), GEODE_BENCH_CODE=str(code))
    results = []
    for n, rows in sizes:
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(
                [sys.executable, __file__, "--prepare", str(n), str(rows), d],
                capture_output=True,
                text=True,
                cwd=REPO,
                env=env,
            )
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            prep = json.loads(out.stdout.strip().splitlines()[-1])
            size = {"notes": n, "ledger_rows": rows, **prep, "agents": []}
            print(json.dumps({k: v for k, v in size.items() if k != "agents"}), flush=True)
            for name in agents:
                out = subprocess.run(
                    [sys.executable, __file__, "--agent", name, d], capture_output=True, text=True, cwd=REPO, env=env
                )
                if out.returncode != 0:
                    r = {"agent": name, "status": "crashed", "reason": out.stderr.strip().splitlines()[-1:]}
                else:
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                size["agents"].append(r)
                print(json.dumps(r), flush=True)
            results.append(size)
    if not partial:  # only the whole bench (both sizes, all agents, this tree) rewrites the table
        write_md(results)
    return 0


def write_md(results: list[dict]) -> None:
    rows = []
    for size in results:
        for r in size["agents"]:
            if r["status"] in ("missing", "crashed"):
                rows.append(
                    f"| {size['notes']:,} | {r['agent']} | **{r['status']}** | – | – | – | – | {r.get('reason', '')} |"
                )
                continue
            props = ", ".join(f"{k} {v:,}" for k, v in sorted(r["proposals"].items())) or "none"
            finds = sum(r["findings"].values())
            rows.append(
                f"| {size['notes']:,} | {r['agent']} | {r['status']} | {r['seconds']} | {r['peak_rss_mib']} "
                f"| {r['examined_notes']:,} | {finds:,} | {props} |"
            )
    ledgers = "\n".join(
        f"- {s['notes']:,} notes: store generated in {s['generate_store_s']} s, ledger of "
        f"{s['ledger_rows']:,} rows in {s['generate_ledger_s']} s; rows by kind "
        f"{json.dumps(dict(sorted(s['ledger_kinds'].items())))}"
        for s in results
    )
    details = "\n".join(
        f"- {s['notes']:,} notes, {r['agent']}: findings {json.dumps(dict(sorted(r.get('findings', {}).items())))}"
        + (f"; message: {r['message']}" if r.get("message") else "")
        for s in results
        for r in s["agents"]
        if r["status"] not in ("missing", "crashed")
    )
    text = f"""# Upkeep: all four agents at 10,000 and 100,000 notes, a ledger of 1,000,000 rows

Measured with `.venv/bin/python bench/upkeep_all.py` on {platform.machine()}, {os.cpu_count()} CPUs,
Python {platform.python_version()}, {time.strftime("%Y-%m-%d")}. Each agent is one
`geode.agents.upkeep.run_agent` in a fresh process (examine, census, findings stored, proposals filed
in the SQLite approval queue); peak memory is that process's maximum resident set
(`ru_maxrss`: the interpreter, SQLAlchemy, the loaded store and the agent's own state). An agent
that is not installed is listed as **missing**.

| notes | agent | status | seconds | peak MiB | notes examined | findings | proposals |
| ---: | --- | --- | ---: | ---: | ---: | ---: | --- |
{chr(10).join(rows)}

{ledgers}

{details}

The store: folders of 500 notes with frontmatter, wikilinks to the next and previous note, a
markdown link across folders, 1 in 100 a broken link; 1 note in 10 is a crystal bound to bash with
its own term. The ledger spans 60 days in sessions of 20 rows: deliveries, withholdings and budget
skips of a third of the crystals (the other two thirds never fire), blocked and marked lookups
grepping for one of 400 topics (the command in `detail`), searches finding three random notes,
session ends. The Gardener reads the last 30 days of it (about half the rows).
"""
    (REPO / "bench" / "UPKEEP_ALL.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
