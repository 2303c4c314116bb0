"""The first revision: exactly the schema geode 0.1.0 made with ``SQLModel.metadata.create_all``.

Nine tables, the records that cannot be rebuilt from the markdown files: the usage ledger
(``ledger_event``) and the control arm's plan (``control_plan``), from ``geode.records.models``;
the approval queue (``proposal``, ``proposal_change``, ``proposal_action``, ``proposal_journal``),
from ``geode.queue.proposals``; upkeep runs and their findings (``upkeep_run``, ``finding``),
from ``geode.agents.contract``; the scheduler's nights (``upkeep_night``), from
``geode.scheduler.nightly``. The tables are written out here, never imported from those modules:
a revision is a frozen record of what the schema was, and ``delivery`` may not import the rooms
above it. Python-side column defaults (``default=""``) are not schema and do not appear here.

Each table is created by its own function, listed in ``TABLES`` in creation order (a parent
before the tables that reference it). ``geode.records.migrations`` uses ``TABLES`` to adopt a
database that 0.1.0 made without migrations: the tables it has are checked against these, the
ones it lacks are created, and the database is stamped with this revision.

Revision ID: 0001_baseline
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None


def _ledger_event() -> None:
    op.create_table(
        "ledger_event",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(32), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("domain", sa.Text(), nullable=False),
        sa.Column("crystal_id", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("channel", sa.String(20), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("chars", sa.Integer(), nullable=False),
        sa.Column("truncated", sa.Integer(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.UniqueConstraint("event_id"),  # unnamed, as create_all made it
    )
    op.create_index("ix_ledger_event_kind", "ledger_event", ["kind"])
    op.create_index("ix_ledger_event_session", "ledger_event", ["session"])
    op.create_index("ix_ledger_event_crystal_id", "ledger_event", ["crystal_id"])
    op.create_index("ix_ledger_event_ts", "ledger_event", ["ts"])


def _control_plan() -> None:
    op.create_table(
        "control_plan",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.Column("stop_units", sa.Integer(), nullable=False),
        sa.Column("stop_date", sa.String(32), nullable=True),
        sa.Column("salt", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
    )


def _proposal() -> None:
    op.create_table(
        "proposal",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("agent", sa.String(80), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("domain", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("journal_id", sa.Integer(), nullable=True),
        sa.UniqueConstraint("run_id", "key", name="uq_proposal_run_key"),
    )
    op.create_index("ix_proposal_status", "proposal", ["status"])
    op.create_index("ix_proposal_agent_kind", "proposal", ["agent", "kind"])


def _proposal_change() -> None:
    op.create_table(
        "proposal_change",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("proposal_id", sa.Integer(), sa.ForeignKey("proposal.id"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("before_sha", sa.String(64), nullable=True),
        sa.Column("after_sha", sa.String(64), nullable=True),
        sa.Column("before", sa.LargeBinary(), nullable=True),
        sa.Column("after", sa.LargeBinary(), nullable=True),
        sa.Column("mode", sa.Integer(), nullable=True),
        sa.Column("before_mode", sa.Integer(), nullable=True),
    )
    op.create_index("ix_proposal_change_proposal", "proposal_change", ["proposal_id", "seq"])


def _proposal_action() -> None:
    op.create_table(
        "proposal_action",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("proposal_id", sa.Integer(), sa.ForeignKey("proposal.id"), nullable=False),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("who", sa.Text(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    op.create_index("ix_proposal_action_proposal", "proposal_action", ["proposal_id"])


def _proposal_journal() -> None:
    op.create_table(
        "proposal_journal",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("proposal_id", sa.Integer(), sa.ForeignKey("proposal.id"), nullable=False),
        sa.Column("op", sa.String(10), nullable=False),
        sa.Column("direction", sa.String(10), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("prior_status", sa.String(20), nullable=False),
        sa.Column("who", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("plan", sa.Text(), nullable=False),
    )
    op.create_index("ix_proposal_journal_state", "proposal_journal", ["state"])


def _upkeep_run() -> None:
    op.create_table(
        "upkeep_run",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(120), nullable=False),
        sa.Column("agent", sa.String(80), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("examined", sa.Text(), nullable=False),
        sa.Column("skipped", sa.Text(), nullable=False),
        sa.Column("proposals", sa.Text(), nullable=False),
        sa.Column("store_notes", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=False),
        sa.Column("trigger", sa.String(40), nullable=False),
        sa.UniqueConstraint("run_id", "agent", name="uq_upkeep_run_run_agent"),
    )
    op.create_index("ix_upkeep_run_started", "upkeep_run", ["started_at"])


def _finding() -> None:
    op.create_table(
        "finding",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(120), nullable=False),
        sa.Column("agent", sa.String(80), nullable=False),
        sa.Column("key", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(60), nullable=False),
        sa.Column("domain", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("suggestion", sa.Text(), nullable=False),
        sa.Column("severity", sa.String(10), nullable=False),
        sa.UniqueConstraint("run_id", "agent", "key", name="uq_finding_run_agent_key"),
    )
    op.create_index("ix_finding_run", "finding", ["run_id"])
    op.create_index("ix_finding_kind", "finding", ["kind"])


def _upkeep_night() -> None:
    op.create_table(
        "upkeep_night",
        sa.Column("run_id", sa.String(120), primary_key=True),
        sa.Column("due", sa.Text(), nullable=False),
        sa.Column("enqueued_at", sa.Float(), nullable=False),
        sa.Column("pid", sa.String(20), nullable=False),
    )


#: Every table of this revision and the function that creates it, parents first.
TABLES = {
    "ledger_event": _ledger_event,
    "control_plan": _control_plan,
    "proposal": _proposal,
    "proposal_change": _proposal_change,
    "proposal_action": _proposal_action,
    "proposal_journal": _proposal_journal,
    "upkeep_run": _upkeep_run,
    "finding": _finding,
    "upkeep_night": _upkeep_night,
}


def upgrade() -> None:
    for create in TABLES.values():
        create()


def downgrade() -> None:
    # The records cannot be rebuilt: geode never drops them. Kept for alembic's interface only.
    raise NotImplementedError("the first revision is not reversible: dropping it would delete the records")
