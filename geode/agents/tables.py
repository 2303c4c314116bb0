"""The upkeep runs' tables (SQLModel): ``upkeep_run`` (one row per run and agent, its report)
and ``finding`` (what an agent found in a run, each with its file and line).

Apart from ``geode.agents.contract`` because importing the contract must stay cheap and must
not pull in SQLModel: ``contract.tables()`` imports this module on first use. The records
migrations (``geode.records.migrations``) create and upgrade these tables; the column order,
types and defaults here are the baseline revision's (tests/test_migrations.py compares them).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from geode.records.models import table_of


class UpkeepRun(SQLModel, table=True):
    """One agent's part of one upkeep run: its status and report, kept for ``geode upkeep``."""

    __tablename__ = "upkeep_run"
    __table_args__ = (
        UniqueConstraint("run_id", "agent", name="uq_upkeep_run_run_agent"),
        Index("ix_upkeep_run_started", "started_at"),
    )

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    run_id: str = Field(sa_column=Column(String(120), nullable=False))
    agent: str = Field(sa_column=Column(String(80), nullable=False))
    status: str = Field(sa_column=Column(String(20), nullable=False))
    message: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    examined: str = Field(default="{}", sa_column=Column(Text, nullable=False, default="{}"))  # JSON object
    skipped: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))  # JSON list
    proposals: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))  # JSON list of ids
    store_notes: int = Field(default=0, sa_column=Column(Integer, nullable=False, default=0))
    attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, default=0))
    started_at: float = Field(default=0.0, sa_column=Column(Float, nullable=False, default=0.0))
    finished_at: float = Field(default=0.0, sa_column=Column(Float, nullable=False, default=0.0))
    trigger: str = Field(default="", sa_column=Column(String(40), nullable=False, default=""))


class FindingRow(SQLModel, table=True):
    """A stored ``contract.Finding`` (the dataclass the agents return), one per run, agent and key."""

    __tablename__ = "finding"
    __table_args__ = (
        UniqueConstraint("run_id", "agent", "key", name="uq_finding_run_agent_key"),
        Index("ix_finding_run", "run_id"),
        Index("ix_finding_kind", "kind"),
    )

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    run_id: str = Field(sa_column=Column(String(120), nullable=False))
    agent: str = Field(sa_column=Column(String(80), nullable=False))
    key: str = Field(sa_column=Column(String(32), nullable=False))
    kind: str = Field(sa_column=Column(String(60), nullable=False))
    domain: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    path: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    line: int = Field(default=0, sa_column=Column(Integer, nullable=False, default=0))
    target: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    message: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    suggestion: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    severity: str = Field(default="warning", sa_column=Column(String(10), nullable=False, default="warning"))


RUN = table_of(UpkeepRun)
FINDING = table_of(FindingRow)
