"""What reading a team's rules costs the hook: an Edit through the real hook command, with and
without a ``[team_rules]`` domain, as ratios to ``python -c pass`` measured in the same run.

Three arms, interleaved call by call so that the machine's load falls on all of them alike:

- ``python -c pass``: the interpreter start every hook call pays;
- ``hook, no team rules``: an Edit of ``src/cart.ts`` with a store of two crystals, one of
  which (``match: cart.ts``) is delivered, so both hook arms deliver one note and write one row;
- ``hook, team rules``: the same home with the fixture repository (tests/fixtures/team_repo)
  as a team-rules domain: the Edit checks the team files (``team_sync.sync``) and delivers the
  TypeScript rule its glob attaches.

Run: ``nice python -m bench.team_rules_speed --runs 40`` (prints a JSON summary and the table
rows of bench/TEAM_RULES.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "team_repo"


def _home(base: Path, repo: Path | None) -> Path:
    home = base / ("home-team" if repo else "home-plain")
    store = home / "store"
    store.mkdir(parents=True)
    (store / "deploy.md").write_text(
        "---\nname: deploy\ncrystal:\n  deliver: act\n  on: bash\n  match: deploy\n---\n"
        "<!-- crystal:essence -->\nDeploys go out from main only.\n<!-- /crystal:essence -->\n"
    )
    if not repo:  # the same work as the team arm: one note delivered on this Edit
        (store / "cart.md").write_text(
            "---\nname: cart\ncrystal:\n  deliver: act\n  on: edit\n  match: cart.ts\n---\n"
            "<!-- crystal:essence -->\nMoney is an integer count of cents in the cart.\n<!-- /crystal:essence -->\n"
        )
    cfg = '[domains]\nmain = "store"\n'
    if repo:
        cfg += f'\n[team_rules]\nacme = "{repo}"\n'
    (home / "geode.toml").write_text(cfg)
    return home


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from geode.install.hooks import hook_command

    base = Path(tempfile.mkdtemp(prefix="geode-team-bench-"))
    try:
        repo = base / "acme"
        shutil.copytree(FIXTURE, repo)
        homes = {"hook, no team rules": _home(base, None), "hook, team rules": _home(base, repo)}
        event = json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "bench",
                "cwd": str(repo),
                "tool_name": "Edit",
                "tool_input": {"file_path": str(repo / "src/cart.ts"), "old_string": "a", "new_string": "b"},
            }
        )
        arms: dict[str, tuple[str, dict]] = {"python -c pass": (f"{sys.executable} -c pass", dict(os.environ))}
        for name, home in homes.items():
            env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
            env.update(GEODE_HOME=str(home), GEODE_WITHHOLD_RATE="0", GEODE_BACKGROUND_BUILD="0")
            arms[name] = (hook_command("claude", home=home), env)
        times: dict[str, list[float]] = {n: [] for n in arms}
        delivered = {}
        for i in range(args.runs + 3):  # three warm-up rounds (the index builds on the first)
            for name, (cmd, env) in arms.items():
                t0 = time.perf_counter()
                p = subprocess.run(["/bin/sh", "-c", cmd], input=event, capture_output=True, text=True, env=env)
                dt = (time.perf_counter() - t0) * 1000
                if i >= 3:
                    times[name].append(dt)
                delivered[name] = "integer count of cents" in p.stdout
        assert delivered["hook, team rules"] and delivered["hook, no team rules"], delivered
        base_ms = statistics.median(times["python -c pass"])
        out = {
            n: {"median_ms": round(statistics.median(xs), 2), "ratio": round(statistics.median(xs) / base_ms, 2)}
            for n, xs in times.items()
        }
        print(json.dumps({"runs": args.runs, "arms": out, "delivered": delivered}, indent=1))
        for n, r in out.items():
            print(f"| {n} | {r['median_ms']} | {r['ratio']} |")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
