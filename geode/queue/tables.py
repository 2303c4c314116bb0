"""The approval queue's tables (SQLModel): ``proposal``, ``proposal_change``,
``proposal_action`` and ``proposal_journal``, and ``ensure_tables``.

Apart from ``geode.queue.proposals`` (filing, reading, rejecting) and ``geode.queue.apply``
(applying, undoing, reconciling) because both of them, the records migrations and the page read
these definitions, and a schema reads better on its own than between the functions that use it.
The records migrations (``geode.records.migrations``) create and upgrade them.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from geode.records import migrations
from geode.records.models import table_of


class Proposal(SQLModel, table=True):
    __tablename__ = "proposal"
    __table_args__ = (
        UniqueConstraint("run_id", "key", name="uq_proposal_run_key"),
        Index("ix_proposal_status", "status"),
        Index("ix_proposal_agent_kind", "agent", "kind"),
    )

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    run_id: str = Field(sa_column=Column(String(255), nullable=False))
    key: str = Field(sa_column=Column(String(255), nullable=False))
    agent: str = Field(sa_column=Column(String(80), nullable=False))
    kind: str = Field(sa_column=Column(String(20), nullable=False))
    domain: str = Field(sa_column=Column(Text, nullable=False))
    title: str = Field(sa_column=Column(Text, nullable=False))
    rationale: str = Field(sa_column=Column(Text, nullable=False))
    evidence: str = Field(sa_column=Column(Text, nullable=False))  # JSON list
    status: str = Field(sa_column=Column(String(20), nullable=False))
    message: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: float = Field(sa_column=Column(Float, nullable=False))
    updated_at: float = Field(sa_column=Column(Float, nullable=False))
    #: The open journal entry while an apply or undo is in flight (or was cut short by a crash).
    journal_id: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))


class ProposalChange(SQLModel, table=True):
    __tablename__ = "proposal_change"
    __table_args__ = (Index("ix_proposal_change_proposal", "proposal_id", "seq"),)

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    proposal_id: int = Field(sa_column=Column(Integer, ForeignKey("proposal.id"), nullable=False))
    seq: int = Field(sa_column=Column(Integer, nullable=False))
    path: str = Field(sa_column=Column(Text, nullable=False))
    before_sha: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    after_sha: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    before: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    after: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    mode: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    before_mode: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))


class ProposalAction(SQLModel, table=True):
    __tablename__ = "proposal_action"
    __table_args__ = (Index("ix_proposal_action_proposal", "proposal_id"),)

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    proposal_id: int = Field(sa_column=Column(Integer, ForeignKey("proposal.id"), nullable=False))
    action: str = Field(sa_column=Column(String(20), nullable=False))
    outcome: str = Field(sa_column=Column(String(20), nullable=False))
    who: str = Field(sa_column=Column(Text, nullable=False))
    at: float = Field(sa_column=Column(Float, nullable=False))
    detail: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


class ProposalJournal(SQLModel, table=True):
    """The intent journal: written (committed) before the first file is touched, marked when the
    last one is done. ``plan`` is a JSON list of ``{seq, path, from_sha, to_sha, from_mode,
    to_mode, tmp}``; ``direction`` turns to ``back`` when an apply aborts and rolls back."""

    __tablename__ = "proposal_journal"
    __table_args__ = (Index("ix_proposal_journal_state", "state"),)

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    proposal_id: int = Field(sa_column=Column(Integer, ForeignKey("proposal.id"), nullable=False))
    op: str = Field(sa_column=Column(String(10), nullable=False))  # apply | undo
    direction: str = Field(sa_column=Column(String(10), nullable=False))  # forward | back
    state: str = Field(sa_column=Column(String(12), nullable=False))  # open | done | rolled_back
    prior_status: str = Field(sa_column=Column(String(20), nullable=False))
    who: str = Field(sa_column=Column(Text, nullable=False))
    pid: int = Field(sa_column=Column(Integer, nullable=False))
    host: str = Field(sa_column=Column(Text, nullable=False))
    started_at: float = Field(sa_column=Column(Float, nullable=False))
    finished_at: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    plan: str = Field(sa_column=Column(Text, nullable=False))


class ProposalFact(SQLModel, table=True):
    """One fact a proposal rests on (issue 21: evidence was only the rationale's prose): what
    kind of fact (``frontmatter``, ``line``, ``link``, ``file``, ``count``, ``move``,
    ``redirect``...), where (``path``, ``line``: 0 for the whole file or folder), what it says
    (``value``, JSON) and who wrote it (``provenance``: ``person``, or ``geode:<proposal id>``
    when an applied proposal did). The filing gate checks every one against the applied
    proposals before the proposal is filed, and refuses one that rests on geode's own writing;
    a proposal filed before this table existed has no rows here and reads as ``facts: []``."""

    __tablename__ = "proposal_fact"
    __table_args__ = (Index("ix_proposal_fact_proposal", "proposal_id", "seq"),)

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    proposal_id: int = Field(sa_column=Column(Integer, ForeignKey("proposal.id"), nullable=False))
    seq: int = Field(sa_column=Column(Integer, nullable=False))
    kind: str = Field(sa_column=Column(String(40), nullable=False))
    path: str = Field(sa_column=Column(Text, nullable=False))
    line: int = Field(sa_column=Column(Integer, nullable=False))
    value: str = Field(sa_column=Column(Text, nullable=False))  # JSON
    provenance: str = Field(sa_column=Column(String(80), nullable=False))


TABLES = [table_of(m) for m in (Proposal, ProposalChange, ProposalAction, ProposalJournal)]
P, C, A, J = TABLES
F = table_of(ProposalFact)


def ensure_tables(engine) -> None:
    """The queue's tables at the current schema: the records migrations, upgraded to head if
    behind (nothing after the first call with this engine)."""
    migrations.upgrade_to_head(engine)
