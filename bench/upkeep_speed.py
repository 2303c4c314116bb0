"""Upkeep speed: the Librarian on generated stores of 10,000 and 100,000 notes.

Each size runs in a fresh process (so the peak resident memory, ``ru_maxrss``, is that run's
alone) and is measured twice:

- ``examine``: the Librarian reading the store and resolving every link (no database);
- ``run``: the whole upkeep run through ``geode.agents.upkeep.run_agent`` on SQLite: the examine,
  the census, storing every finding, filing every proposal in the approval queue.

The store: folders of 500 notes, frontmatter on every note, each note linking to the next
and the previous by wikilink, to a note in another folder by a relative markdown link with an
anchor, and naming a file path; 1 note in 100 has a broken link, 1 in 500 a link that names
a note by its alias (a proposal).

    .venv/bin/python bench/upkeep_speed.py            # 10,000 and 100,000; writes bench/UPKEEP.md
    .venv/bin/python bench/upkeep_speed.py 2000       # other sizes, printed only
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PER_FOLDER = 500


def note_path(i: int) -> str:
    return f"area-{i // PER_FOLDER:03d}/note-{i:06d}.md"


def generate(root: Path, n: int) -> dict:
    broken = aliased = 0
    for f in range((n + PER_FOLDER - 1) // PER_FOLDER):
        (root / f"area-{f:03d}").mkdir(parents=True, exist_ok=True)
    (root / "area-000" / "scripts").mkdir(exist_ok=True)
    (root / "area-000" / "scripts" / "check.sh").write_text("#!/bin/sh\n")
    for i in range(n):
        nxt, prv = (i + 1) % n, (i - 1) % n
        other = (i + 7 * PER_FOLDER + 3) % n
        next_target = f"note-{nxt:06d}"
        if i % 100 == 50:
            next_target = f"note-gone-{i:06d}"
            broken += 1
        elif i % 500 == 260:
            next_target = f"alias {nxt}"
            aliased += 1
        lines = [
            "---",
            f"title: Note {i}",
            f"aliases: [alias {i}]",
            "type: fact",
            "tags: [bench]",
            "---",
            f"# Note {i}",
            "",
            "## Details",
            f"Something worth knowing, number {i}. Run `area-000/scripts/check.sh` after.",
            f"Next: [[{next_target}]]. Previous: [[note-{prv:06d}|the one before]].",
            f"See also [note {other}](../{note_path(other)}#details).",
        ]
        (root / note_path(i)).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"broken": broken, "aliased": aliased}


def one(n: int, workdir: str) -> dict:
    root = Path(workdir) / "store"
    t = time.perf_counter()
    made = generate(root, n)
    gen_s = time.perf_counter() - t

    from geode.agents.contract import Context, census, ensure_tables
    from geode.agents.upkeep import run_agent
    from geode.kernel.config import load_settings
    from geode.librarian.agent import Librarian
    from geode.records.models import init_db

    settings = load_settings(store=root, home=Path(workdir) / "home", env={})
    t = time.perf_counter()
    Librarian().examine(Context(settings, None, "bench"))
    examine_s = time.perf_counter() - t
    rss_examine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    engine = init_db(settings)
    ensure_tables(engine)
    t = time.perf_counter()
    full = run_agent(settings, engine, "bench-run", "librarian")
    run_s = time.perf_counter() - t
    rss_run = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kinds: dict[str, int] = {}
    for f in full.findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    return {
        "notes": n,
        "census": census(settings).notes,
        "generate_s": round(gen_s, 1),
        "examine_s": round(examine_s, 2),
        "run_s": round(run_s, 2),
        "peak_rss_mib_after_examine": round(rss_examine / 1024, 1),
        "peak_rss_mib_after_run": round(rss_run / 1024, 1),
        "status": full.status,
        "examined_notes": full.examined["notes"],
        "links": full.examined["links"],
        "findings": kinds,
        "proposals": len(full.proposals),
        "planted": made,
        "notes_per_s_examine": round(n / examine_s),
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        print(json.dumps(one(int(argv[1]), argv[2])))
        return 0
    sizes = [int(a) for a in argv] or [10_000, 100_000]
    results = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(n), d],
                capture_output=True,
                text=True,
                cwd=REPO,
                env=dict(os.environ, PYTHONPATH=str(REPO)),
            )
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(r)
            print(json.dumps(r))
    if not argv:
        write_md(results)
    return 0


def write_md(results: list[dict]) -> None:
    rows = "\n".join(
        f"| {r['notes']:,} | {r['examined_notes']:,} | {r['links']:,} | {r['examine_s']} | {r['notes_per_s_examine']:,} "
        f"| {r['peak_rss_mib_after_examine']} | {r['run_s']} | {r['peak_rss_mib_after_run']} "
        f"| {sum(r['findings'].values()):,} | {r['proposals']} | {r['status']} |"
        for r in results
    )
    detail = "\n".join(
        f"- {r['notes']:,} notes: findings by kind {json.dumps(r['findings'], sort_keys=True)}; "
        f"planted {r['planted']['broken']} broken and {r['planted']['aliased']} aliased links"
        for r in results
    )
    text = f"""# Upkeep speed: the Librarian at 10,000 and 100,000 notes

Measured with `.venv/bin/python bench/upkeep_speed.py` on {platform.processor() or platform.machine()},
{os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime("%Y-%m-%d")}. Each size runs in
a fresh process; peak memory is that process's maximum resident set (`ru_maxrss`), which includes
the interpreter, SQLAlchemy and the loaded store.

- **examine**: the Librarian reads every note and resolves every link (no database).
- **run**: the whole upkeep run (`geode.agents.upkeep.run_agent`): examine, census, every finding
  stored, every proposal filed in the SQLite approval queue.

| notes | examined | links | examine s | notes/s | peak MiB (examine) | run s | peak MiB (run) | findings | proposals | status |
| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
{rows}

{detail}

The generated store: folders of {PER_FOLDER} notes with frontmatter, each note linking to the next
and previous note by wikilink, to a note in another folder by a relative markdown link with an
anchor, and naming a script path; 1 in 100 has a broken link, 1 in 500 names a note by its alias
(one proposal each). Memory grows with the store because the whole store is loaded at once
(`geode.kernel.store.load_store`); see docs/UPKEEP.md for what that means at a million notes.
"""
    (REPO / "bench" / "UPKEEP.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
