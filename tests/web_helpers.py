"""A store with a known night of proposals, and ``geode web`` started as a real process on it.

The night is filed through the queue's own API (``file_proposal`` with ``FileChange`` built by
``edit_change``/``archive_changes``/``status_change``), its findings through the agents'
recording (``store_findings``), its ledger rows through the ledger's insert, its upkeep reports
through ``begin_attempt``/``finish_run``: the same tables and code paths a real night writes,
with contents chosen so the tests know every id, path and byte.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.stores import NO_BACKGROUND_BUILD

REPO = Path(__file__).resolve().parents[1]
NIGHT = "night-2026-03-14"
EARLIER = "night-2026-03-13"

NOTES = {
    "notes/exit-code.md": (
        "---\nname: exit-code\ndescription: After `a | b`, $? is b's status.\ntype: feedback\ntags: [shell, ci]\n"
        'crystal:\n  deliver: act\n  on: bash\n  match: "| tail, |tail"\n---\n'
        "<!-- crystal:essence -->\nA pipeline's exit status is the status of its **last** command.\n"
        "<!-- /crystal:essence -->\n\n## Where this came from\nThe build looked green.\n\n"
        "- relates_to [[pipefail]]\nSee also [[git-add-all]] and [[missing-note]].\n"
    ),
    "notes/pipefail.md": (
        "---\nname: pipefail\ndescription: set -o pipefail keeps the first failure\ntype: fact\ntags: [shell]\n"
        "status: draft\n---\nUse `set -o pipefail` so a failing stage fails the pipeline.\n\n"
        "- part_of [[exit-code]]\n"
    ),
    "notes/git-add-all.md": (
        "---\nname: git-add-all\ndescription: git add -A sweeps stray build output\ntype: feedback\ntags: [git]\n"
        'crystal:\n  deliver: act\n  on: commit\n  match: "git add -A"\n---\n'
        "<!-- crystal:essence -->\n`git add -A` stages everything, build output included.\n"
        "<!-- /crystal:essence -->\n"
    ),
    "notes/old-retry.md": (
        "---\nname: old-retry\ndescription: the retry cut-off of 2025\nstatus: deprecated\n---\n"
        "Retries stopped after three attempts (2025).\n"
    ),
    "notes/dup-b.md": ("---\nname: dup-b\ndescription: a duplicate of pipefail\n---\nUse pipefail.\n"),
    "runbooks/deploy.md": (
        "---\nname: deploy\ndescription: how a deploy goes\ntype: runbook\ntags: [ci]\n---\n"
        "1. Build with [the pipe note](../notes/exit-code-old.md) in mind.\n2. Ship.\n"
    ),
    "index.md": ("---\nname: index\n---\n# Index\n\n- [[exit-code-old]]\n- [[pipefail]]\n- [[old-retry]]\n"),
    "evil.md": (
        "---\nname: evil\n---\nA note that tries <script>document.title='pwned'</script> and "
        "<img src=x onerror=alert(1)>.\n"
    ),
}


@dataclass
class Night:
    home: Path
    store: Path
    settings: object
    ids: dict = field(default_factory=dict)  # name -> proposal id
    findings: dict = field(default_factory=dict)
    ledger: dict = field(default_factory=dict)


def write(root: Path, rel: str, text: str | bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def make_night(tmp_path: Path, toml_extra: str = "") -> Night:
    """GEODE_HOME and a store under ``tmp_path``, with two nights of known proposals
    (``toml_extra``: more of geode.toml, e.g. a ``[database]`` table)."""
    from geode.agents import contract, recording
    from geode.delivery import ledger
    from geode.kernel.config import load_settings
    from geode.queue import changes as CH
    from geode.queue import proposals as Q
    from geode.records.models import insert_events

    home, store = tmp_path / "home", tmp_path / "store"
    home.mkdir()
    store.mkdir()
    for rel, text in NOTES.items():
        write(store, rel, text)
    (home / "geode.toml").write_text(
        f'[domains]\nmain = {json.dumps(str(store))}\n\n[web]\nwho = "Ada Reviewer"\n{toml_extra}', encoding="utf-8"
    )
    s = load_settings(home=home, env={})
    engine = Q.open_queue(s)
    contract.ensure_tables(engine)
    n = Night(home, store, s)

    now = time.time()
    events = [
        ledger.new_event(
            "blocked",
            ts=now - 3600,
            session="s1",
            domain="main",
            action="bash",
            detail=json.dumps({"command": "grep -r 'git add' ~/.geode/store"}),
        ),
        ledger.new_event(
            "delivered",
            ts=now - 1800,
            session="s2",
            domain="main",
            crystal_id="main:notes/exit-code.md",
            path="notes/exit-code.md",
            action="bash",
            channel="act",
            term="| tail",
            chars=120,
            agent="main",
        ),
    ]
    insert_events(engine, events)
    from sqlalchemy import select

    from geode.records.models import LedgerEvent

    t = LedgerEvent.__table__
    with engine.connect() as conn:
        for kind, i in conn.execute(select(t.c.kind, t.c.id)):
            n.ledger[kind] = i

    def finding(run: str, agent: str, kind: str, path: str, line: int, target: str, message: str, suggestion=""):
        f = contract.Finding(kind, path, line, target, message, "main", suggestion)
        recording.store_findings(engine, run, agent, [f] + [x for x in _kept.get((run, agent), [])])
        _kept.setdefault((run, agent), []).append(f)
        return f.id

    _kept: dict = {}

    def file(name: str, agent: str, kind: str, title: str, changes, evidence, run: str = NIGHT):
        pid = Q.file_proposal(
            s,
            engine,
            Q.ProposalDraft(
                agent=agent,
                kind=kind,
                domain="main",
                title=title,
                rationale=f"{title}: because the test says so.",
                evidence=evidence,
                changes=changes,
                run_id=run,
                key=name,
            ),
        )
        assert pid is not None
        n.ids[name] = pid

    f1 = finding(
        NIGHT, "librarian", "broken-link", "index.md", 6, "exit-code-old", "no note named exit-code-old", "exit-code"
    )
    f2 = finding(
        NIGHT,
        "librarian",
        "broken-link",
        "runbooks/deploy.md",
        7,
        "../notes/exit-code-old.md",
        "no such file",
        "../notes/exit-code.md",
    )
    f3 = finding(NIGHT, "cleaner", "retired-note", "notes/old-retry.md", 1, "", "deprecated for 90 days")
    f4 = finding(NIGHT, "cleaner", "duplicate", "notes/dup-b.md", 1, "notes/pipefail.md", "says what pipefail says")
    f5 = finding(NIGHT, "corrector", "stale-status", "notes/pipefail.md", 6, "", "draft for 200 days")
    n.findings = {"index": f1, "deploy": f2, "old-retry": f3, "dup-b": f4, "pipefail": f5}

    # the earlier night first, as a real schedule files them
    file(
        "bind-git-add",
        "gardener",
        "edit",
        "Bind git-add-all to `git add .` too (found by a blocked lookup)",
        [
            CH.edit_change(
                s,
                "main",
                "notes/git-add-all.md",
                NOTES["notes/git-add-all.md"].replace('match: "git add -A"', 'match: "git add -A, git add ."'),
            )
        ],
        [{"ledger_event": n.ledger["blocked"]}],
        run=EARLIER,
    )
    time.sleep(0.01)
    file(
        "fix-index",
        "librarian",
        "edit",
        "Repair the link to exit-code in index.md",
        [CH.edit_change(s, "main", "index.md", NOTES["index.md"].replace("[[exit-code-old]]", "[[exit-code]]"))],
        [{"finding": f1}],
    )
    file(
        "fix-deploy",
        "librarian",
        "edit",
        "Repair the path to the pipe note in the deploy runbook",
        [
            CH.edit_change(
                s, "main", "runbooks/deploy.md", NOTES["runbooks/deploy.md"].replace("exit-code-old.md", "exit-code.md")
            )
        ],
        [{"finding": f2}],
    )
    file(
        "archive-old-retry",
        "cleaner",
        "archive",
        "Archive old-retry (deprecated)",
        CH.archive_changes(s, "main", "notes/old-retry.md"),
        [{"finding": f3}],
    )
    file(
        "archive-dup-b",
        "cleaner",
        "archive",
        "Archive dup-b (a duplicate of pipefail)",
        CH.archive_changes(s, "main", "notes/dup-b.md"),
        [{"finding": f4}],
    )
    file(
        "pipefail-stable",
        "corrector",
        "status",
        "Mark pipefail stable",
        [CH.status_change(s, "main", "notes/pipefail.md", "stable")],
        [{"finding": f5}],
    )

    for run, agent, examined, props in (
        (EARLIER, "gardener", {"notes": 8, "ledger_events": 1}, ["bind-git-add"]),
        (NIGHT, "librarian", {"notes": 8, "links": 9}, ["fix-index", "fix-deploy"]),
        (NIGHT, "cleaner", {"notes": 8, "folders": 3}, ["archive-old-retry", "archive-dup-b"]),
        (NIGHT, "corrector", {"notes": 8, "findings": 5}, ["pipefail-stable"]),
        (NIGHT, "gardener", {"notes": 8, "ledger_events": 2}, []),
    ):
        recording.begin_attempt(engine, run, agent, trigger="schedule")
        rep = contract.Report(
            agent=agent,
            status=contract.OK if props else contract.NOTHING_TO_LEARN,
            examined=examined,
            run_id=run,
            store_notes=8,
            proposals=[{"id": n.ids[k], "kind": "edit", "paths": []} for k in props],
        )
        recording.finish_run(engine, rep)
        time.sleep(0.01)
    engine.dispose()
    return n


# -- the server, as a real process ----------------------------------------------------------------
URL_RE = re.compile(r"(http://[^\s/]+:(\d+)/\?token=([A-Za-z0-9_\-]+))")


class Server:
    """``geode web --port 0 --no-open`` on a home; ``url`` (with the token), ``base``, ``token``."""

    def __init__(self, home: Path, *extra: str, env: dict | None = None, timeout: float = 60.0):
        e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
        e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
        e.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "geode", "web", "--port", "0", "--no-open", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=e,
            cwd=str(home),
        )
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"geode web exited {self.proc.returncode}: {self.proc.stderr.read()}")
                continue
            m = URL_RE.search(line)
            if m:
                self.url, self.port, self.token = m.group(1), int(m.group(2)), m.group(3)
                self.base = f"http://127.0.0.1:{self.port}"
                break
        else:
            self.stop()
            raise RuntimeError(f"geode web printed no URL within {timeout} s: {line!r}")
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("geode web does not accept connections")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stderr.read() if self.proc.stderr else ""

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def request(
    server: Server,
    method: str,
    path: str,
    *,
    body=None,
    headers: dict | None = None,
    auth: bool = True,
    host: str | None = None,
) -> tuple[int, dict, bytes]:
    """One raw HTTP request (``http.client``: every header, Host included, exactly as given;
    ``host=""`` sends none)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    hs = {"Host": f"127.0.0.1:{server.port}" if host is None else host}
    if host == "":
        del hs["Host"]  # no Host header at all
    if auth:
        hs["Authorization"] = f"Bearer {server.token}"
    hs.update(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hs.setdefault("Content-Type", "application/json")
        hs["Content-Length"] = str(len(data))
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in hs.items():
        conn.putheader(k, v)
    conn.endheaders(data)
    r = conn.getresponse()
    out = r.read()
    status, rh = r.status, {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    return status, rh, out


# -- the browser ----------------------------------------------------------------------------------
#: Debian's chromium, driven by Playwright through ``executable_path``; ``GEODE_CHROMIUM`` names
#: another executable (and lets a test see what a machine without one sees)
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing_browser() -> str | None:
    """What is missing for a browser run, said as what to install; None when nothing is."""
    path = os.environ.get("GEODE_CHROMIUM") or CHROMIUM
    if not os.access(path, os.X_OK):
        return (
            f"{path} is missing: install Debian's chromium package (`apt-get install chromium`;"
            " scripts/test does), or set GEODE_CHROMIUM to a Chromium executable"
        )
    try:
        import playwright.sync_api  # noqa: F401  (in the test extra)
    except ImportError:
        return "Playwright for Python is missing: `pip install -e '.[test]'` (never `playwright install`)"
    return None


@contextmanager
def open_browser(fail: Callable[..., object]) -> Iterator:
    """A headless Chromium for the length of the block; ``fail(message, pytrace=False)`` is
    called (and must raise) when the browser or Playwright is missing."""
    why = missing_browser()
    if why is not None:
        fail(why, pytrace=False)
        raise RuntimeError(why)  # ``fail`` must not return
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=os.environ.get("GEODE_CHROMIUM") or CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


# -- a queue at size: 5,000 proposals over a store of 10,000 notes ---------------------------------
def big_queue(tmp_path: Path) -> Path:
    """A home whose queue holds 5,000 proposals over a store of 10,000 notes (indexed); its path."""
    from geode.kernel.config import load_settings
    from geode.queue import proposals as Q
    from geode.recall.recall_index import RecallIndex

    home, root = tmp_path / "home", tmp_path / "store"
    home.mkdir()
    for i in range(10_000):
        d = root / f"d{i % 100:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"n{i:05d}.md").write_text(
            f"---\nname: n{i:05d}\ntype: {['fact', 'runbook', 'feedback'][i % 3]}\ntags: [t{i % 17}]\n---\n"
            f"Note {i} about topic {i % 97}. See [[n{(i + 1) % 10_000:05d}]].\n",
            encoding="utf-8",
        )
    (home / "geode.toml").write_text(f"[domains]\nmain = {json.dumps(str(root))}\n", encoding="utf-8")
    s = load_settings(home=home, env={})
    RecallIndex(s).refresh()
    engine = Q.open_queue(s)
    agents = ["librarian", "cleaner", "corrector", "gardener"]
    for i in range(5_000):
        rel = f"d{i % 100:02d}/n{i:05d}.md"
        data = (root / rel).read_bytes()
        Q.file_proposal(
            s,
            engine,
            Q.ProposalDraft(
                agent=agents[i % 4],
                kind="edit",
                domain="main",
                title=f"Edit n{i:05d}",
                rationale="speed check",
                evidence=[{"finding": i + 1}],
                changes=[Q.FileChange(rel, Q.sha256(data), data + b"\nmore\n")],
                run_id=f"night-2026-02-{1 + i % 28:02d}",
                key=f"k{i}",
            ),
        )
    engine.dispose()
    return home


#: the first contentful paint as the browser recorded it (the entry may land just after "load")
FCP_JS = """new Promise((resolve) => {
  new PerformanceObserver((list) => {
    const e = list.getEntriesByName('first-contentful-paint')[0];
    if (e) resolve(e.startTime);
  }).observe({type: 'paint', buffered: true});
})"""
