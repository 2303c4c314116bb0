"""The agent contract: what an agent examined, what it found, what it proposed, and the rule
that a run which examined nothing, or fewer notes than the store holds, is a failure.

Why the rule lives here and not in each agent: the original Cleaner walked three folders
named by hand in its source, found nothing over its cap on a stranger's store and announced
"everything within cap". The count it is held to is taken here, by a walk of the store that
the agent does not control (``census``), so an agent that looks at less than the store holds
cannot report success.

Why the tables are read through ``tables()``: importing this module must stay cheap and must
not pull in SQLAlchemy (they are declared in ``geode.agents.tables``, imported on first use);
the worker, the CLI and the tests call ``ensure_tables(engine)`` before they write runs or
findings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from geode.kernel.store import NAME_NOT_UTF8, StoreLoad, iter_note_paths, load_store, unentered

if TYPE_CHECKING:  # the queue imports SQLAlchemy: only its name is needed here, for the checker
    from geode.queue.proposals import ProposalDraft

#: statuses of a finished run
OK, FAILED, NOTHING_TO_LEARN = "ok", "failed", "nothing-to-learn"
#: statuses of a run that has not finished: sent and waiting for a worker (``geode.agents.nights``), or running
QUEUED, RUNNING = "queued", "running"
FINAL_STATUSES = frozenset({OK, FAILED, NOTHING_TO_LEARN})


@dataclass
class Finding:
    """One thing an agent found, about one file and line (``line`` 0: the whole file).

    ``path`` is relative to the domain's root (POSIX separators). ``target`` is what the
    finding points at (a link target, a path, a folder); ``suggestion`` the one good
    replacement when there is one. ``id`` is set once the finding is stored.
    """

    kind: str
    path: str
    line: int
    target: str = ""
    message: str = ""
    domain: str = ""
    suggestion: str = ""
    severity: str = "warning"  # error | warning | info
    id: int | None = None

    @property
    def key(self) -> str:
        """Stable identity inside one run: the same finding on a rerun keeps its row and id."""
        raw = "\x1f".join([self.domain, self.kind, self.path, str(self.line), self.target])
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Skipped:
    """Something an agent saw and did not check, and why (a link to a generated page, ...)."""

    path: str
    line: int
    target: str
    reason: str
    domain: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


#: the kinds of fact a proposal may rest on, and what ``value`` holds for each
FACT_KINDS = {
    "frontmatter": '{"key": k, "value": v}: a frontmatter value the note holds now',
    "line": "the text of a line of the note (a link, a binding, a heading)",
    "file": "the file exists (a link's target, a note a rule judges)",
    "count": '{"count": n, "cap": c}: the notes a folder holds',
    "move": '{"from": old, "to": new}: an applied move of this very document',
    "redirect": '{"from": old, "to": new, "source": where}: a redirect or alias the store declares',
    "git-rename": '{"from": old, "to": new, "commit": sha}: the git history of this very path',
}


@dataclass
class Fact:
    """One fact a proposal rests on (issue 21: evidence was only the rationale's words): what
    kind (``FACT_KINDS``), where (``path`` relative to the domain, ``line`` 0 for the whole
    file or folder), what it says (``value``), and who wrote it. An agent leaves
    ``provenance`` as it is: the filing gate (``geode.agents.filing``) works it out from the
    applied proposals (``person``, or ``geode:<proposal id>``) and refuses a proposal that rests
    on geode's own writing, whatever the agent believed."""

    kind: str
    path: str
    line: int = 0
    value: Any = None
    provenance: str = "person"

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Proposed:
    """A proposal an agent wants filed. ``draft`` is a ``ProposalDraft`` without its evidence; ``findings`` are the findings it rests on (their ids become the
    evidence once they are stored); ``facts`` the facts it rests on besides those the findings
    name (the gate adds a ``line`` or ``file`` fact for each finding's place itself)."""

    draft: ProposalDraft
    findings: list[Finding] = field(default_factory=list)
    ledger_events: list[int] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    #: whether the places of its findings are facts it rests on (the gate adds them); False for a
    #: proposal whose findings only say where the change goes while the ledger rows it cites
    #: justify it (a salience step: a value geode stepped before is stepped again by new use)
    place_facts: bool = True


class FindingRecord(TypedDict):
    """A finding as a report prints it (``Report.as_dict``)."""

    id: int | None
    kind: str
    path: str
    line: int
    target: str
    message: str
    domain: str
    suggestion: str
    severity: str


class ReportRecord(TypedDict):
    """What ``Report.as_dict`` returns: one agent's run as ``geode upkeep --json`` prints it and
    the runs table keeps it."""

    agent: str
    run_id: str
    status: str
    message: str
    examined: dict[str, int]
    store_notes: int
    findings: list[FindingRecord]
    skipped: list[dict[str, Any]]
    proposals: list[dict]
    held_back: dict[str, int]
    attempts: int
    started_at: float
    finished_at: float


@dataclass
class Report:
    """What one agent did in one run."""

    agent: str
    status: str = OK
    message: str = ""
    examined: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    proposed: list[Proposed] = field(default_factory=list)
    #: filed proposals: ``{"id", "kind", "paths"}`` (set by the runner)
    proposals: list[dict] = field(default_factory=list)
    run_id: str = ""
    attempts: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0
    store_notes: int = 0  # what the census counted: the store holds this many note files
    #: drafts not filed, by reason: pending, rejected, undone (an identical proposal with the same
    #: evidence is already there, ``geode.agents.filing``), would-break-links (the no-harm check),
    #: would-change-header, geode-made-evidence (it rests on what geode itself wrote)
    held_back: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def as_dict(self) -> ReportRecord:
        return {
            "agent": self.agent,
            "run_id": self.run_id,
            "status": self.status,
            "message": self.message,
            "examined": dict(self.examined),
            "store_notes": self.store_notes,
            "findings": [
                {
                    "id": f.id,
                    "kind": f.kind,
                    "path": f.path,
                    "line": f.line,
                    "target": f.target,
                    "message": f.message,
                    "domain": f.domain,
                    "suggestion": f.suggestion,
                    "severity": f.severity,
                }
                for f in self.findings
            ],
            "skipped": [s.as_dict() for s in self.skipped],
            "proposals": list(self.proposals),
            "held_back": dict(self.held_back),
            "attempts": self.attempts,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


class Context:
    """What an agent is handed: the settings, the records engine, the run id, the findings
    the agents before it stored in this run (the Corrector reads them), and the store, read
    by the agent itself through ``load(domain)``."""

    def __init__(self, settings, engine=None, run_id: str = "", prior_findings: list[Finding] | None = None):
        self.settings = settings
        self.engine = engine
        self.run_id = run_id
        self.prior_findings = list(prior_findings or [])
        self._loads: dict[str, StoreLoad] = {}
        #: a link resolver (``geode.links.resolver.StoreLinks``) an agent built for a domain's load,
        #: offered to the no-harm gate (``geode.agents.filing``), which uses it only when it is
        #: the one it would build itself
        self.resolvers: dict[str, Any] = {}

    def domains(self) -> list[tuple[str, str]]:
        """The domains upkeep maintains: every one but the team-rules domains, whose notes are
        derived from a team's own files (``geode.delivery.team_sync``) and not geode's to edit."""
        return upkept_domains(self.settings)

    def readable(self, report: Report):
        """``(domain, load)`` for each domain that holds notes, after recording the files it
        could not read as ``unreadable`` findings (and in ``examined["unreadable"]``): the
        preamble every agent needs, so that none can forget to report what it could not see."""
        for domain, _root in self.domains():
            load = self.load(domain)
            bad = unreadable_findings(load)
            report.findings.extend(bad)
            folders = {p.path for p in unentered(load)}  # findings too, but not note files
            files = [f for f in bad if f.path not in folders]
            report.examined["unreadable"] = report.examined.get("unreadable", 0) + len(files)
            if folders:
                report.examined["unentered"] = report.examined.get("unentered", 0) + len(folders)
            if load.notes:
                yield domain, load

    def load(self, domain: str) -> StoreLoad:
        """The store of one domain, loaded once per run (every file, unreadable ones as problems)."""
        if domain not in self._loads:
            root = self.settings.domains[domain]
            self._loads[domain] = load_store(root, domain, self.settings.max_file_bytes)
        return self._loads[domain]


class Agent:
    """Base of the four agents. ``examine`` reads the store (never a hard-coded list of
    folders or names) and returns a ``Report`` with ``examined`` counts by kind; it must set
    ``examined["notes"]`` (notes it loaded and checked) and ``examined["unreadable"]``
    (note files it could not read, each also a finding with file and line)."""

    name = "agent"

    def examine(self, ctx: Context) -> Report:  # pragma: no cover - abstract
        raise NotImplementedError


# -- the census and the rule ---------------------------------------------------------------
@dataclass
class Census:
    notes: int = 0  # note files the store holds
    folders: int = 0
    missing: list[str] = field(default_factory=list)  # domains whose root is absent or unreadable
    #: folders the census could not see into (unreadable, or symlinked out of the store): the
    #: notes in them are counted nowhere, so the run cannot be green
    unentered: list[str] = field(default_factory=list)


def upkept_domains(settings) -> list[tuple[str, str]]:
    """``(domain, root)`` of the domains the agents examine (the team-rules domains left out)."""
    team = getattr(settings, "team_rules", None) or {}
    return [(d, r) for d, r in settings.domain_roots() if d not in team]


def census(settings) -> Census:
    """Count the note files of every domain with a walk the agents do not control."""
    c = Census()
    for domain, root in upkept_domains(settings):
        if not os.path.isdir(root) or not os.access(root, os.R_OK | os.X_OK):
            c.missing.append(f"{domain} ({root})")
            continue
        try:
            os.listdir(root)
        except OSError:
            c.missing.append(f"{domain} ({root})")
            continue
        dirs = set()
        load = StoreLoad(root=root, domain=domain)
        for rel in iter_note_paths(root, load):
            c.notes += 1
            dirs.add(rel.rsplit("/", 1)[0] if "/" in rel else "")
        c.folders += len(dirs)
        c.unentered.extend(f"{domain}:{p.path} ({p.message})" for p in unentered(load))
    return c


def apply_rule(report: Report, counted: Census) -> Report:
    """No green over nothing: a run that examined nothing, or fewer notes than the store
    holds, is ``failed`` with a message that says what it could not see."""
    report.store_notes = counted.notes
    examined = int(report.examined.get("notes", 0))
    unreadable = int(report.examined.get("unreadable", 0))
    reasons = []
    if counted.missing:
        reasons.append("cannot read the store folder of " + ", ".join(counted.missing))
    if counted.unentered:
        reasons.append(
            f"cannot see into {len(counted.unentered)} folder(s), whose notes nobody examined: "
            + "; ".join(counted.unentered[:10])
            + (f" and {len(counted.unentered) - 10} more" if len(counted.unentered) > 10 else "")
        )
    if counted.notes == 0:
        reasons.append("the store holds no note files (.md, .mdc, .markdown): there is nothing to examine")
    if examined == 0:
        reasons.append(
            f"{report.agent} examined no notes"
            + (f" (all {unreadable} note files were unreadable)" if unreadable else "")
        )
    elif examined + unreadable < counted.notes:
        reasons.append(
            f"{report.agent} examined {examined} notes (and {unreadable} unreadable) "
            f"of the {counted.notes} note files the store holds: "
            f"{counted.notes - examined - unreadable} were never looked at"
        )
    if reasons:
        report.status = FAILED
        report.message = "; ".join(reasons) + (f"; {report.message}" if report.message else "")
    return report


def unreadable_findings(load: StoreLoad) -> list[Finding]:
    """Every note file the store walk could not read, as a finding with its file and line."""
    out = []
    for p in load.problems:
        if p.code == "no-store":
            continue
        if (p.code.startswith("skip-") or p.code == NAME_NOT_UTF8) and p.severity == "error":
            out.append(
                Finding("unreadable", p.path, p.line, "", f"{p.message} [{p.code}]", load.domain, severity="error")
            )
    return out


#: the finding kind of a note an agent could not finish: the rest of its run went on
NOTE_FAILED = "note-failed"


@contextmanager
def one_note(report: Report, agent: str, domain: str, path: str) -> Iterator[None]:
    """The work an agent does on one note (reading it again, editing it, filing its proposal):
    whatever that one note makes it raise is a ``note-failed`` finding naming the note, and the
    run goes on to the next. One note with LF CR line endings took the Corrector's whole run
    down ("examined no notes") before; the store's other notes deserve their upkeep."""
    try:
        yield
    except Exception as exc:  # plugin boundary: one note's failure (a bug included) never ends the whole run
        logging.getLogger(__name__).warning(
            "%s: %s:%s failed: %s: %s", agent, domain, path, type(exc).__name__, exc, exc_info=True
        )
        report.findings.append(
            Finding(
                NOTE_FAILED,
                path,
                0,
                "",
                f"the {agent} could not finish this note ({type(exc).__name__}: {exc}); nothing was proposed "
                "for it, the rest of the store was examined",
                domain,
                severity="error",
            )
        )
        report.examined[NOTE_FAILED] = report.examined.get(NOTE_FAILED, 0) + 1


# -- tables --------------------------------------------------------------------------------
def tables():
    """``(upkeep_run, finding)``: the tables of ``geode.agents.tables``, imported on first use
    (SQLModel is not imported with the contract)."""
    from geode.agents.tables import FINDING, RUN

    return RUN, FINDING


def ensure_tables(engine) -> None:
    """The run and finding tables at the current schema: the records migrations
    (``geode.records.migrations``), upgraded to head if behind."""
    from geode.records import migrations

    migrations.upgrade_to_head(engine)


# -- reading runs back (written by ``geode.agents.recording``) --------------------------------
def load_findings(conn_or_engine, run_id: str, agent: str | None = None, kinds: tuple[str, ...] = ()) -> list[Finding]:
    """Stored findings of a run (the Corrector reads these; it never calls the other agents)."""
    from sqlalchemy import select

    _run, finding = tables()
    q = select(finding).where(finding.c.run_id == run_id)
    if agent:
        q = q.where(finding.c.agent == agent)
    if kinds:
        q = q.where(finding.c.kind.in_(kinds))
    q = q.order_by(finding.c.id)

    def _read(conn):
        return [
            Finding(
                r["kind"],
                r["path"],
                r["line"],
                r["target"],
                r["message"],
                r["domain"],
                r["suggestion"],
                r["severity"],
                r["id"],
            )
            for r in conn.execute(q).mappings()
        ]

    from sqlalchemy.engine import Engine

    if isinstance(conn_or_engine, Engine):
        with conn_or_engine.connect() as conn:
            return _read(conn)
    return _read(conn_or_engine)


#: where ``held_back`` is kept in the ``examined`` column (no column of its own: no migration)
HELD_BACK_KEY = "__held_back__"


def report_from_row(row, conn=None) -> Report:
    examined = json.loads(row["examined"] or "{}")
    held = examined.pop(HELD_BACK_KEY, {}) if isinstance(examined, dict) else {}
    r = Report(
        agent=row["agent"],
        status=row["status"],
        message=row["message"],
        examined=examined,
        held_back=dict(held) if isinstance(held, dict) else {},
        skipped=[Skipped(**s) for s in json.loads(row["skipped"] or "[]")],
        proposals=json.loads(row["proposals"] or "[]"),
        run_id=row["run_id"],
        attempts=int(row["attempts"]),
        started_at=float(row["started_at"]),
        finished_at=float(row["finished_at"]),
        store_notes=int(row["store_notes"]),
    )
    if conn is not None:
        r.findings = load_findings(conn, row["run_id"], row["agent"])
    return r


def get_report(engine, run_id: str, agent: str) -> Report | None:
    from sqlalchemy import select

    run, _f = tables()
    with engine.connect() as conn:
        row = conn.execute(select(run).where(run.c.run_id == run_id, run.c.agent == agent)).mappings().first()
        return report_from_row(row, conn) if row is not None else None


def list_runs(engine, limit: int = 50) -> list[dict]:
    """Kept reports, newest first (without their findings; ``findings`` is a count)."""
    from sqlalchemy import func, select

    run, finding = tables()
    with engine.connect() as conn:
        counts = dict(
            conn.execute(
                select(finding.c.run_id + "\x1f" + finding.c.agent, func.count()).group_by(
                    finding.c.run_id, finding.c.agent
                )
            ).all()
        )
        rows = (
            conn.execute(select(run).order_by(run.c.started_at.desc(), run.c.id.desc()).limit(limit)).mappings().all()
        )
    out = []
    for r in rows:
        examined = json.loads(r["examined"] or "{}")
        held = examined.pop(HELD_BACK_KEY, {}) if isinstance(examined, dict) else {}
        out.append(
            {
                "run_id": r["run_id"],
                "agent": r["agent"],
                "status": r["status"],
                "message": r["message"],
                "examined": examined,
                "held_back": held,
                "findings": counts.get(f"{r['run_id']}\x1f{r['agent']}", 0),
                "proposals": len(json.loads(r["proposals"] or "[]")),
                "attempts": r["attempts"],
                "started_at": r["started_at"],
                "finished_at": r["finished_at"],
                "trigger": r["trigger"],
            }
        )
    return out
