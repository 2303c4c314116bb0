"""The facts a proposal rests on, one row each (issue 21).

Why a table and not a column: a proposal rests on several facts (a link's line, the file it
names, a frontmatter value, a folder's count), each with its own place and provenance, and the
filing gate, ``geode proposals show`` and the page read them one by one. A proposal filed before
this revision simply has no rows (it reads as ``facts: []``); nothing existing is rewritten.

Revision ID: 0002_proposal_fact
Revises: 0001_baseline
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_proposal_fact"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "proposal_fact",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("proposal_id", sa.Integer(), sa.ForeignKey("proposal.id"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("provenance", sa.String(80), nullable=False),
    )
    op.create_index("ix_proposal_fact_proposal", "proposal_fact", ["proposal_id", "seq"])


def downgrade() -> None:
    # The records cannot be rebuilt: geode never drops them. Kept for alembic's interface only.
    raise NotImplementedError("geode never drops records")
