"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Created: ${create_date}

Explicit operations only; never import the models (see geode/records/migrations/__init__.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    ${upgrades if upgrades else "raise NotImplementedError('write the operations of this revision')"}


def downgrade() -> None:
    ${downgrades if downgrades else "raise NotImplementedError('geode never drops records')"}
