"""One night of upkeep, end to end (issue 5): a store with known problems, the REAL scheduler
firing, REAL Celery workers running the four agents through Redis in their order, the queue
holding exactly the expected proposals, a person approving them all, and the next night
finding nothing new: no new proposal, and the findings left are the ones a person must handle.

The store's problems, one per agent's duty:

- a note renamed through the queue (``runbooks/deploy.md`` -> ``runbooks/deploy-checklist.md``,
  an applied move) while the index and a guide still link to the old name: the Librarian;
- a crystal-memory ``match: | tail, |tail``: the Corrector quotes it; a Cursor rule's unquoted
  glob (``globs: **/*.py``) is Cursor's own header line and is left as it is (issue 21); a fact last verified in 2020: the Corrector marks it ``review_due``;
- a folder over its cap (``inbox/``: five notes, cap three) and a duplicate pair: the Cleaner;
- a lookup blocked twice in the ledger (``grep -rn kubeconfig``): the Gardener.

Skipped, with the reason, when no Redis answers on 127.0.0.1:6379.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from geode.queue import apply
from tests.prereqs import absent

pytestmark = pytest.mark.services  # Redis and real Celery workers

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REDIS_DB = 12

INDEX = """---
name: index
type: index
---
# Ops notes

- [Start here](guide/start.md)
- [Deploy](runbooks/deploy.md)
- [DB host](facts/db-host.md)
- [Python rules](rules/python.mdc)
- [Pipes](crystals/tail.md)
- [Retries](notes/retry-policy.md) and [again](notes/retry-policy-again.md)
"""

START = """---
name: start
---
# Start here

Before a release read [the deploy runbook](../runbooks/deploy.md) and [[runbooks/deploy]].
Back to the [index](../README.md).
"""

DEPLOY = """---
name: deploy-checklist
type: runbook
---
# Deploy checklist

Tag the release, push the tag, watch the canary for an hour. See the [index](../README.md).
"""

PYTHON_RULE = """---
description: Python style for this repo
globs: **/*.py
alwaysApply: false
---
# Python style

Type hints on every public function. Back to the [index](../README.md).
"""

TAIL = """---
name: exit-code-through-tail
crystal:
  deliver: act
  on: bash
  match: | tail, |tail
  who: all
---
<!-- crystal:essence -->
A pipe into tail reports tail's exit status; set -o pipefail first.
<!-- /crystal:essence -->

## Where this came from
A red build shown green, 2026-06-01. Back to the [index](../README.md).
"""

DB_HOST = """---
name: db-host
type: fact
last_verified: 2020-01-01
---
# DB host

The primary database runs on db-1; the replica on db-2. Back to the [index](../README.md).
"""

RETRY = """---
name: {name}
type: runbook
---
# {title}

{body} Back to the [index](../README.md).
"""
RETRY_A = (
    "When the upload to the artifact store fails with a timeout, retry it five times with exponential "
    "backoff starting at one second, and page the on-call engineer if the fifth attempt fails too."
)
RETRY_B = (
    "When an upload to the artifact store fails with a timeout, retry it five times using exponential "
    "backoff starting at one second, and page the on-call engineer when the fifth attempt fails too."
)

IDEA = """---
name: idea-{i}
---
# Idea {i}

{text}
"""
IDEAS = [
    "Cache the wheel builds between CI jobs.",
    "Try a smaller runner for lint.",
    "Move nightly tests to 02:00.",
    "Drop the old Python 3.9 job.",
    "Record flaky tests in one list.",
]

CLEANER_TOML = '[cleaner.caps]\n"inbox" = 3\n'


def build_night_store(tmp_path: Path, toml: str = CLEANER_TOML):
    """The store with its problems, its records (the applied rename) and its ledger (two blocked
    lookups). Returns ``(settings, engine, root)``."""
    from geode.delivery import ledger
    from geode.queue import apply, proposals
    from geode.queue import changes as CH
    from geode.queue import tables as queue_tables
    from tests.stores import GeodeEnv

    files = {
        "README.md": INDEX,
        "guide/start.md": START,
        "runbooks/deploy.md": DEPLOY,
        "rules/python.mdc": PYTHON_RULE,
        "crystals/tail.md": TAIL,
        "facts/db-host.md": DB_HOST,
        "notes/retry-policy.md": RETRY.format(name="retry-policy", title="Retrying uploads", body=RETRY_A),
        "notes/retry-policy-again.md": RETRY.format(
            name="retry-policy-again", title="Retrying an upload", body=RETRY_B
        ),
    }
    for i, text in enumerate(IDEAS, 1):
        files[f"inbox/idea-{i}.md"] = IDEA.format(i=i, text=text)
    settings, engine, root = GeodeEnv(tmp_path, root="ops").files(files, toml)
    queue_tables.ensure_tables(engine)
    domain = settings.default_domain

    # the rename, done through the queue by a person (no link rewrites: that is what broke them)
    draft = proposals.ProposalDraft(
        "person",
        "move",
        domain,
        "Rename deploy to deploy-checklist",
        "a clearer name",
        [{"ledger_event": 1}],
        CH.move_changes(settings, domain, "runbooks/deploy.md", "runbooks/deploy-checklist.md"),
        "before-the-night",
        "rename-deploy",
    )
    pid = proposals.file_proposal(settings, engine, draft)
    assert apply.approve(settings, engine, pid, "person")["ok"]

    # the ledger: a lookup the guard blocked twice, in two sessions
    now = time.time()
    rows = []
    for n, session in enumerate(("s1", "s2")):
        rows.append(
            ledger.new_event(
                "blocked",
                ts=now - 3600 + 60 * n,
                session=session,
                event_id=uuid.uuid4().hex,
                domain=domain,
                action="grep",
                channel="guard",
                term="grep",
                detail={"tool": "Bash", "what": "grep", "command": f"grep -rn kubeconfig {root}"},
            )
        )
    # the ledger's first row, 40 days back: the Gardener files nothing from a ledger younger than its window
    rows.append(
        ledger.new_event(
            "blocked",
            ts=now - 40 * 86400,
            session="s0",
            event_id=uuid.uuid4().hex,
            domain=domain,
            action="grep",
            channel="guard",
            term="grep",
            detail={"tool": "Bash", "what": "grep"},
        )
    )
    assert ledger.append(settings, rows) == "db"
    return settings, engine, root


#: what night 1 must leave in the queue: (agent, kind, paths) for each proposal
NIGHT_1 = {
    ("librarian", "edit", ("README.md",)),
    ("librarian", "edit", ("guide/start.md",)),
    ("corrector", "edit", ("crystals/tail.md",)),
    ("corrector", "edit", ("facts/db-host.md",)),
}
#: the Cleaner's and the Gardener's, checked against their code: see the module docstring
NIGHT_1_CLEANER = {
    ("cleaner", "archive", ("archive/inbox/idea-1.md", "inbox/idea-1.md")),
    ("cleaner", "archive", ("archive/inbox/idea-2.md", "inbox/idea-2.md")),
    # the merge draft beside the first of the pair (by path); neither original is touched
    ("cleaner", "new_note", ("notes/retry-policy-again.merge.md",)),
}
NIGHT_1_GARDENER = {
    ("gardener", "new_note", ("stubs/lookup-kubeconfig.md",)),
}


def _redis_ok() -> bool:
    try:
        import redis

        return bool(redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB, socket_timeout=1).ping())
    except Exception:
        return False


class Night:
    """Workers and schedulers as real processes, each with its log; stopped at the end."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.settings, self.engine, self.root = build_night_store(tmp_path)
        self.queue = f"geode-night-{uuid.uuid4().hex[:10]}"
        self.env = dict(os.environ)
        self.env.pop("GEODE_UPKEEP_AT", None)
        self.env.update(
            {
                "GEODE_HOME": self.settings.home,
                "GEODE_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
                "GEODE_QUEUE": self.queue,
                "GEODE_UPKEEP_RUN_ID_SECONDS": "1",  # two nights in one test: run ids to the second
                "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            }
        )
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def spawn(self, args: list[str], name: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
        log = self.tmp / f"{name}.log"
        self.logs.append(log)
        p = subprocess.Popen(
            args, cwd=REPO, env=env or self.env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(p)
        return p, log

    def start_workers(self, n: int = 2) -> None:
        for i in range(n):
            _p, log = self.spawn(
                [
                    str(BIN / "celery"),
                    "-A",
                    "geode.agents.celery_app",
                    "worker",
                    "-Q",
                    self.queue,
                    "--concurrency=1",
                    "--pool=prefork",
                    "--loglevel=INFO",
                    "-n",
                    f"{self.queue}-{i}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                f"worker-{i}",
            )
            self.wait(lambda log=log: "ready" in log.read_text(), 90, "a worker did not start")

    def fire_night(self, lead_s: int = 8) -> str:
        """Start a real ``geode scheduler`` whose nightly time is a few seconds ahead, wait until
        it has fired (the night's row is written), stop it; returns the night's run id."""
        from geode.scheduler import nightly

        at = dt.datetime.now().replace(microsecond=0) + dt.timedelta(seconds=lead_s)
        if at.date() != dt.date.today():  # a trigger a few seconds ahead would fall tomorrow: wait for midnight
            time.sleep((dt.datetime.combine(at.date(), dt.time()) - dt.datetime.now()).total_seconds() + 1)
            at = dt.datetime.now().replace(microsecond=0) + dt.timedelta(seconds=lead_s)
        env = dict(self.env, GEODE_UPKEEP_AT=at.strftime("%H:%M:%S"))
        proc, log = self.spawn(
            [str(BIN / "geode"), "scheduler", "--home", self.settings.home, "--store", str(self.root)],
            f"scheduler-{at.strftime('%H%M%S')}",
            env,
        )
        self.wait(lambda: "next run" in log.read_text(), 60, "the scheduler did not start")
        assert f"next run {at.strftime('%Y-%m-%d %H:%M:%S')}" in log.read_text(), (
            "the scheduler started after its time: " + log.read_text()
        )
        run_id = nightly.run_id_for(at, seconds=True)
        self.wait(lambda: run_id in nightly.enqueued_nights(self.settings), 60, "the scheduler never fired")
        self.wait(
            lambda: f"fired for {at.strftime('%Y-%m-%d %H:%M:%S')}" in log.read_text(),
            30,
            "the scheduler wrote the night but never said it fired",
        )
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        return run_id

    def finished(self, run_id: str, agents: list[str], timeout: float = 300) -> dict:
        from geode.agents.contract import FINAL_STATUSES, get_report

        got: dict = {}

        def done():
            for a in agents:
                if a not in got:
                    r = get_report(self.engine, run_id, a)
                    if r is not None and r.status in FINAL_STATUSES:
                        got[a] = r
            return len(got) == len(agents)

        self.wait(done, timeout, f"night {run_id} did not finish: {sorted(got)} of {agents}")
        return got

    def wait(self, cond, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.2)
        raise AssertionError(message + "\n" + "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.logs))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)


@pytest.fixture
def night(tmp_path):
    if not _redis_ok():
        absent("redis", "no Redis on 127.0.0.1:6379: this test needs the real broker")
    n = Night(tmp_path)
    yield n
    n.stop()


def _runs_in_order(engine, run_id: str) -> list[tuple[str, float, float]]:
    from sqlalchemy import select

    from geode.agents.contract import tables

    run, _f = tables()
    with engine.connect() as conn:
        rows = conn.execute(
            select(run.c.agent, run.c.started_at, run.c.finished_at, run.c.trigger)
            .where(run.c.run_id == run_id)
            .order_by(run.c.started_at)
        ).all()
    assert {r.trigger for r in rows} == {"schedule"}
    return [(r.agent, r.started_at, r.finished_at) for r in rows]


def test_one_night_end_to_end_then_the_next_finds_nothing_new(night):
    from geode.agents.upkeep import ORDER, available
    from geode.queue import proposals
    from geode.queue import review as queue_review

    installed, missing = available(night.settings)
    assert (installed, missing) == (list(ORDER), [])  # all four agents, in their order
    want = NIGHT_1 | NIGHT_1_CLEANER | NIGHT_1_GARDENER

    night.start_workers(2)
    first = night.fire_night()
    reports = night.finished(first, installed)
    assert {a: r.status for a, r in reports.items()} == {a: ("ok") for a in installed}, {
        a: r.message for a, r in reports.items()
    }
    # the four ran in their order, each after the one before had finished (a chain, two workers)
    order = _runs_in_order(night.engine, first)
    assert [a for a, _s, _f in order] == [a for a in ORDER if a in installed]
    for (_a, _s, fin), (_b, start, _f) in zip(order, order[1:], strict=False):
        assert start >= fin

    filed = proposals.list_proposals(night.engine, run_id=first)
    got = {(p["agent"], p["kind"], tuple(p["paths"])) for p in filed}
    assert got == want, (got - want, want - got)
    assert len(filed) == len(want)
    assert all(p["status"] == "pending" for p in filed)
    # the Corrector acted on what the Librarian stored, and did not repeat its rewrites
    cor = reports["corrector"]
    assert cor.examined["findings_read"] == sum(len(r.findings) for a, r in reports.items() if a != "corrector")
    assert cor.examined["already_proposed"] == 3  # README.md (1 line) and guide/start.md (2 links, 1 line)
    assert (cor.examined["notes_touched"], cor.examined["lines_changed"]) == (2, 2)
    diffs = {p["paths"][0]: queue_review.diff(night.engine, p["id"]) for p in filed if p["agent"] == "corrector"}
    assert "rules/python.mdc" not in diffs  # Cursor reads its header raw: never quoted
    assert '+  match: "| tail, |tail"' in diffs["crystals/tail.md"]
    due = (dt.date.today() + dt.timedelta(days=14)).isoformat()  # ahead, never 2020-03-31
    assert f"+review_due: {due}" in diffs["facts/db-host.md"]

    # a person approves every one of them
    for p in filed:
        res = apply.approve(night.settings, night.engine, p["id"], "person")
        assert res["ok"], (p, res)
    assert f"review_due: {due}" in (night.root / "facts/db-host.md").read_text()
    assert "[Deploy](runbooks/deploy-checklist.md)" in (night.root / "README.md").read_text()

    # the next night: nothing new
    second = night.fire_night()
    assert second != first
    again = night.finished(second, installed)
    assert all(r.status in ("ok", "nothing-to-learn") for r in again.values()), {
        a: (r.status, r.message) for a, r in again.items()
    }
    assert proposals.list_proposals(night.engine, run_id=second) == []
    assert all(r.proposals == [] for r in again.values())
    assert proposals.list_proposals(night.engine, status="pending") == []
    # what is left is for a person, by kind
    left = {}
    for a, r in again.items():
        for f in r.findings:
            left.setdefault(a, {}).setdefault(f.kind, set()).add(f.path)
    assert left.get("corrector") == {"stale": {"facts/db-host.md"}, "awaiting-review": {"facts/db-host.md"}}
    assert left.get("librarian", {}).keys() <= {"orphan", "never-fires"}
    for kind, paths in left.get("librarian", {}).items():
        if kind == "orphan":  # the ideas nobody links to, left in the inbox, and the merge to write
            assert paths == {
                "inbox/idea-3.md",
                "inbox/idea-4.md",
                "inbox/idea-5.md",
                "notes/retry-policy-again.merge.md",
            }
        if kind == "never-fires":  # the Gardener's stub: its essence is a person's to write
            assert paths == {"stubs/lookup-kubeconfig.md"}
    # the pair stays two notes until a person merges them (its draft is there): the one Cleaner finding
    assert left.get("cleaner", {}) == {"near-duplicate": {"notes/retry-policy-again.md"}}
    assert not left.get("gardener")
