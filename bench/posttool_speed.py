"""Speed of geode's PostToolUse hook (failed-then-fixed capture, docs/CAPTURE.md), as a ratio to
``python -c pass``.

Why apart from ``hook_speed.py``: that one measures PreToolUse delivery against stores of 1,000 to
100,000 crystals; the PostToolUse hook never opens the binding index or walks the store, so what
it costs is the interpreter, the settings cache and one ledger write. This measures whole
processes, interleaved round by round (the order rotates every round), every command through
``/bin/sh -c`` as the agent runs it:

- ``python -c pass``: the baseline of the ratio;
- ``before``: the hook command of a checkout without capture (``--before DIR``, e.g. a
  ``git worktree`` of the commit before it) on the same PostToolUse event: that hook reads the
  event and ignores it;
- ``bash ok``: PostToolUse of a successful Bash command (one ``shell_run`` row);
- ``bash failed``: Claude's PostToolUseFailure with an 8-line error (one row with its first lines);
- ``edit``: PostToolUse of an Edit (one ``file_touched`` row).

It then checks that the ledger holds one row per timed capture run (none went to the spool) and
that the last Stop names the draft: a benchmark of a hook that records nothing is worthless.

Run: ``PYTHONPATH=. .venv/bin/python bench/posttool_speed.py [--runs 40] [--crystals 1000] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

ERROR = "Exit code 1\n" + "\n".join(f"FAIL src/suite{i}.test.js: expected 1 to be 2 at line {i}" for i in range(12))


def _store(root: str, n: int) -> None:
    for i in range(n):
        d = os.path.join(root, f"area-{i // 100:03d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"c{i:05d}.md"), "w", encoding="utf-8") as fh:
            fh.write(
                f"---\nname: c{i:05d}\ndescription: bench crystal {i}\ncrystal:\n  deliver: act\n  on: bash\n"
                f'  match: "make target{i:05d}"\n  who: all\n---\n<!-- crystal:essence -->\n'
                f"Essence of crystal {i}.\n<!-- /crystal:essence -->\n"
            )


def _payload(event: str, session: str, **fields) -> str:
    data = {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": event}
    data.update(fields)
    return json.dumps(data)


def _time(cmd: str, stdin: str, env: dict) -> float:
    t = time.perf_counter()
    proc = subprocess.run(["/bin/sh", "-c", cmd], input=stdin, capture_output=True, text=True, env=env, timeout=60)
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{cmd!r} exited {proc.returncode}: {proc.stderr[-500:]}")
    return dt * 1000.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--crystals", type=int, default=1000)
    ap.add_argument("--before", default="", help="a checkout without capture: its hook on the same event")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)

    from geode.install.hooks import hook_command
    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    tmp = tempfile.mkdtemp(prefix="geode-posttool-")
    try:
        home = os.path.join(tmp, "home")
        store = os.path.join(home, "store")
        os.makedirs(store)
        _store(store, args.crystals)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
        env["GEODE_HOME"] = home
        env["GEODE_WITHHOLD_RATE"] = "0"
        settings = load_settings(env=env)
        init_db(settings).dispose()
        compileall.compile_dir(os.path.join(REPO, "geode"), quiet=1)
        cmd = hook_command("claude", home=home)
        # the first call builds the binding index and the settings cache (not timed)
        subprocess.run(
            ["/bin/sh", "-c", cmd],
            input=_payload("SessionStart", "warm", source="startup"),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        py = sys.executable
        arms: dict[str, tuple[str, str]] = {"python -c pass": (f"{py} -c pass", "")}
        ok = _payload(
            "PostToolUse",
            "bench",
            tool_name="Bash",
            tool_input={"command": "npm test -- --runInBand"},
            tool_use_id="t",
            tool_response={"stdout": "PASS", "stderr": "", "interrupted": False},
        )
        if args.before:
            before_main = os.path.join(args.before, "geode", "delivery", "hookmain.py")
            compileall.compile_dir(os.path.join(args.before, "geode"), quiet=1)
            arms["before (PostToolUse ignored)"] = (f"{py} -S {before_main} claude", ok)
        arms["bash ok"] = (cmd, ok)
        arms["bash failed"] = (
            cmd,
            _payload(
                "PostToolUseFailure",
                "bench",
                tool_name="Bash",
                tool_input={"command": "npm test"},
                tool_use_id="t",
                error=ERROR,
            ),
        )
        arms["edit"] = (
            cmd,
            _payload(
                "PostToolUse",
                "bench",
                tool_name="Edit",
                tool_input={"file_path": "/tmp/jest.config.js", "old_string": "a", "new_string": "b"},
                tool_use_id="t",
                tool_response={"filePath": "/tmp/jest.config.js", "success": True},
            ),
        )
        names = list(arms)
        times: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.runs):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                c, stdin = arms[n]
                times[n].append(_time(c, stdin, env))
        # the check: every timed capture run left its row in the ledger, not the spool
        conn = sqlite3.connect(os.path.join(home, "geode.db"))
        counts = dict(conn.execute("SELECT kind, COUNT(*) FROM ledger_event WHERE session='bench' GROUP BY kind"))
        conn.close()
        want = {"shell_run": 2 * args.runs, "file_touched": args.runs}
        if counts != want:
            print(f"CHECK FAILED: ledger rows {counts}, expected {want}", file=sys.stderr)
            return 2
        stop = subprocess.run(
            ["/bin/sh", "-c", cmd],
            input=_payload("Stop", "bench", stop_hook_active=False),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if "- draft failed-npm-test" not in stop.stdout:
            print(f"CHECK FAILED: the Stop hook named no draft: {stop.stdout[:300]!r}", file=sys.stderr)
            return 2
        base = statistics.median(times["python -c pass"])
        rows = []
        print(
            f"PostToolUse hook, {args.crystals} crystals in the store, {args.runs} interleaved rounds, "
            f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
        )
        print("| arm | median ms | p95 ms | ratio to python -c pass |\n| --- | ---: | ---: | ---: |")
        for n in names:
            xs = sorted(times[n])
            med, p95 = statistics.median(xs), xs[min(len(xs) - 1, int(0.95 * len(xs)))]
            rows.append({"arm": n, "median_ms": med, "p95_ms": p95, "ratio": med / base})
            print(f"| {n} | {med:.1f} | {p95:.1f} | {med / base:.2f} |")
        print(f"checks: ledger rows {counts} (none spooled); the Stop hook named the draft")
        if args.out:
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump({"runs": args.runs, "crystals": args.crystals, "arms": rows}, fh, indent=2)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
