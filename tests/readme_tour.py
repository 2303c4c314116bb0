"""The README's "A quick tour" block, read from README.md and run command by command in a fresh
GEODE_HOME and HOME (``tests/test_readme_tour.py`` runs it under pytest, so CI does).

Why parse the README instead of copying its commands: the tour is what a new user types first;
when it changes and a command breaks, a copy in a test would still pass. Run by hand to read
every output as a new user would::

    PYTHONPATH=. python -m tests.readme_tour [WORKDIR]
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TOUR_HEADING = "## A quick tour"


@dataclass
class TourLine:
    """One command of the tour: its words, the README's comment on it, its line in README.md."""

    words: list[str]
    comment: str
    line: int
    text: str

    @property
    def documented_exit_1(self) -> bool:
        """The README says when this command exits 1 (``lint``: a crystal that can never fire)."""
        return "exit 1" in self.comment


@dataclass
class TourRun:
    line: TourLine
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    notes: list[str] = field(default_factory=list)


def tour_block(readme: str | None = None) -> tuple[int, list[str]]:
    """(line number of the block's first line in README.md, the block's lines)."""
    text = README.read_text(encoding="utf-8") if readme is None else readme
    lines = text.splitlines()
    try:
        start = lines.index(TOUR_HEADING)
    except ValueError as exc:
        raise AssertionError(f"{README}: no {TOUR_HEADING!r} heading") from exc
    opening = next(i for i in range(start, len(lines)) if lines[i].startswith("```sh"))
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return opening + 2, lines[opening + 1 : closing]


def tour_lines(readme: str | None = None) -> list[TourLine]:
    """Every command of the tour block; comment-only lines are left out."""
    first, lines = tour_block(readme)
    out = []
    for n, raw in enumerate(lines, start=first):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        m = re.search(r"\s{2,}#\s?(.*)$", raw)
        comment = m.group(1) if m else ""
        words = shlex.split(raw, comments=True)
        if words:
            out.append(TourLine(words, comment, n, raw.strip()))
    return out


def _env(geode_home: Path, user: Path) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e.update(GEODE_HOME=str(geode_home), HOME=str(user), PYTHONPATH=str(ROOT), COLUMNS="120")
    # a fresh user's settings, but the `geode serve` a search starts on demand exits soon after the
    # tour instead of half an hour later (the default), so no server outlives the test
    e["GEODE_SERVE_IDLE_S"] = "15"
    e.pop("XDG_CONFIG_HOME", None)
    return e


def _web(argv: list[str], env: dict, cwd: Path) -> tuple[int, str, str, list[str]]:
    """``geode web`` serves until stopped: start it, fetch the page it names, stop it."""
    p = subprocess.Popen(
        [*argv, "--no-open", "--port", "0"] if "--port" not in argv else [*argv, "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    notes, out = [], []
    deadline = time.time() + 120
    url = None
    assert p.stdout is not None
    while time.time() < deadline and url is None:
        line = p.stdout.readline()
        if not line:
            break
        out.append(line)
        m = re.search(r"http://127\.0\.0\.1:\d+/\S*", line)
        url = m.group(0) if m else None
    if url:
        import http.cookiejar

        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with opener.open(url, timeout=30) as resp:  # the token in the URL becomes a cookie
            body = resp.read().decode("utf-8", "replace")
            notes.append(f"GET {url.split('?')[0]} -> {resp.status}, {len(body)} bytes")
            if resp.status != 200 or "<html" not in body.lower():
                notes.append("FAILED: the page is not HTML")
    else:
        notes.append("FAILED: no http://127.0.0.1 address printed")
    p.terminate()
    try:
        rest, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, err = p.communicate()
    return (0 if url else 1), "".join(out) + rest, err, notes


def run_tour(work: Path, readme: str | None = None, before: dict | None = None) -> list[TourRun]:
    """Run every tour command in ``work`` (``work/user`` as HOME, ``work/project`` as the
    current folder). ``before``: {command prefix: callable(env, cwd)} run just before the first
    command that starts with that prefix (the test adds something for the agents to propose)."""
    user, project = work / "user", work / "project"
    user.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    geode_home = work / "geode-home"
    env = _env(geode_home, user)
    done_before: set[str] = set()
    state: dict = {}  # what one step leaves for the next: the approved id, the store before it
    runs: list[TourRun] = []
    for tl in tour_lines(readme):
        words = list(tl.words)
        if words[0] == "export":
            name, _eq, _value = words[1].partition("=")
            assert name == "GEODE_HOME", f"README.md:{tl.line}: the tour exports {name}, the test knows GEODE_HOME"
            env["GEODE_HOME"] = str(geode_home)  # the README's /tmp path, made private to this run
            continue
        assert words[0] == "geode", f"README.md:{tl.line}: the tour runs {words[0]!r}, not geode"
        for prefix, fn in (before or {}).items():
            if tl.text.startswith(prefix) and prefix not in done_before:
                fn(env, project)
                done_before.add(prefix)
        notes = []
        if "ID" in words:  # a placeholder: the proposal the tour approved (undo), else the first pending
            if words[1:3] == ["proposals", "undo"] and "approved" in state:
                pid = state["approved"]
            else:
                pending = [p for p in _proposals(env, project) if p.get("status") == "pending"]
                assert pending, f"README.md:{tl.line}: no pending proposal to put in for ID"
                pid = pending[0]["id"]
            words = [str(pid) if w == "ID" else w for w in words]
            notes.append(f"ID = {pid}")
            if words[1:3] == ["proposals", "approve"]:
                state["approved"] = pid
                state["before"] = _store_bytes(geode_home)
        argv = [sys.executable, "-m", "geode", *words[1:]]
        t0 = time.perf_counter()
        if words[1] == "web":
            rc, out, err, more = _web(argv, env, project)
            notes += more
        else:
            r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=project, timeout=600)
            rc, out, err = r.returncode, r.stdout, r.stderr
        seconds = round(time.perf_counter() - t0, 2)
        if rc == 0:
            notes += meaning_of(words, out, env, project, geode_home, state)
        runs.append(TourRun(tl, argv, rc, out, err, seconds, notes))
    return runs


def _proposals(env: dict, cwd: Path) -> list[dict]:
    """The queue as ``geode proposals list --json`` prints it."""
    listed = subprocess.run(
        [sys.executable, "-m", "geode", "proposals", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    props = json.loads(listed.stdout)
    return props.get("proposals", props) if isinstance(props, dict) else props


def _store_bytes(geode_home: Path) -> dict[str, bytes]:
    """Every file of the tour's store, by path: what approve must change and undo must restore."""
    store = geode_home / "store"
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


#: the fewest proposals upkeep must file on the demo store (``geode init --demo``: the Librarian's
#: relink, the Cleaner's superseded mark, the Corrector's review date)
MIN_PROPOSED = 3


def meaning_of(words: list[str], out: str, env: dict, cwd: Path, geode_home: Path, state: dict) -> list[str]:
    """What a step that exited 0 must also have done for a person to see what it is for: the demo
    store written, upkeep proposing, show printing a diff, approve changing the store, undo
    restoring its bytes. A ``FAILED: ...`` note for each step that did not (``problems_of``)."""
    cmd = words[1:3]
    bad = []
    if words[1] == "init" and "--demo" in words:
        store = geode_home / "store"
        demo = sorted(p.name for p in store.glob("*.md") if p.name in DEMO_NOTES)
        if demo != sorted(DEMO_NOTES):
            bad.append(f"FAILED: init --demo wrote {demo}, not the demo notes {sorted(DEMO_NOTES)}")
    elif words[1] == "upkeep":
        filed = [p for p in _proposals(env, cwd) if p.get("status") == "pending"]
        agents = sorted({p["agent"] for p in filed})
        if len(filed) < MIN_PROPOSED:
            bad.append(f"FAILED: upkeep proposed {len(filed)} (at least {MIN_PROPOSED} expected on the demo store)")
        state["proposed"] = len(filed)
        bad.append(f"proposed {len(filed)}, by {', '.join(agents)}")
    elif cmd == ["proposals", "list"] and "--json" not in words:
        if state.get("proposed") and "pending" not in out:
            bad.append("FAILED: the list shows no pending proposal")
    elif cmd == ["proposals", "show"]:
        if not re.search(r"^[+-][^+-]", out, re.M):
            bad.append("FAILED: show printed no diff line")
    elif cmd == ["proposals", "approve"]:
        after = _store_bytes(geode_home)
        changed = sorted(k for k in set(after) | set(state.get("before", {})) if after.get(k) != state["before"].get(k))
        status = {p["id"]: p["status"] for p in _proposals(env, cwd)}.get(state.get("approved"))
        if not changed or status != "applied":
            bad.append(f"FAILED: approve changed {changed} and left the proposal {status!r}")
        bad.append(f"approve changed {', '.join(changed)}")
    elif cmd == ["proposals", "undo"]:
        if _store_bytes(geode_home) != state.get("before"):
            bad.append("FAILED: undo did not restore the store's bytes from before the apply")
        else:
            bad.append("undo restored every byte")
    return bad


def problems_of(run: TourRun) -> list[str]:
    """What is wrong with one command's run, as a new user would see it; empty when nothing."""
    tl, out, err = run.line, run.stdout, run.stderr
    where = f"README.md:{tl.line} `{tl.text}`"
    bad = []
    if run.returncode != 0 and not (run.returncode == 1 and tl.documented_exit_1 and "error" in out):
        bad.append(f"{where}: exit {run.returncode}\n{out[-2000:]}\n{err[-2000:]}")
    if "Traceback" in out + err:
        bad.append(f"{where}: a traceback\n{err[-3000:]}")
    if len(out.strip()) < 20:
        bad.append(f"{where}: printed next to nothing: {out!r}")
    bad += [f"{where}: {n}" for n in run.notes if n.startswith("FAILED")]
    if "--json" in tl.words:
        try:
            json.loads(out)
        except ValueError:
            bad.append(f"{where}: --json printed what is not JSON: {out[:300]!r}")
    else:
        raw = re.findall(r"\{'[a-z_]+': |\bNone\b|\b1[6-9]\d{8}(?:\.\d+)?\b", out)
        if raw:
            bad.append(f"{where}: raw Python values for a person ({sorted(set(raw))[:5]}):\n{out[:1500]}")
    return bad


#: The notes ``geode init --demo`` writes beside the starter set (geode/delivery/starter/demo/).
DEMO_NOTES = {p.name for p in (ROOT / "geode" / "delivery" / "starter" / "demo").glob("*.md")}

#: Nothing is added by hand any more: the tour's ``geode init --demo`` gives upkeep its work.
BEFORE: dict = {}


def main(argv: list[str]) -> int:
    work = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="geode-tour-"))
    runs = run_tour(work, before=BEFORE)
    failed = 0
    for run in runs:
        print(f"\n$ {run.line.text}    [exit {run.returncode}, {run.seconds} s]")
        print(run.stdout.rstrip())
        if run.stderr.strip():
            print("[stderr] " + run.stderr.rstrip().replace("\n", "\n[stderr] "))
        for n in run.notes:
            print(f"[note] {n}")
        for p in problems_of(run):
            failed += 1
            print(f"[PROBLEM] {p.splitlines()[0]}")
    print(f"\n{len(runs)} commands, {failed} problem(s); work folder {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
