"""A session's first remaining-calls hint and the service it had then: checked against what it
received by close, the sample that decides how far its tenant's hints are trusted
(shared/core/size_hints.py).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("programs", sa.Column("hint_calls", sa.Integer(), nullable=True))
    op.add_column("programs", sa.Column("hint_service_s", sa.Float(), nullable=True))
    op.create_check_constraint("hint", "programs",
                               "(hint_calls IS NULL) = (hint_service_s IS NULL) "
                               "AND (hint_calls IS NULL OR (hint_calls >= 1 AND hint_service_s >= 0))")


def downgrade() -> None:
    op.drop_constraint("hint", "programs", type_="check")
    op.drop_column("programs", "hint_service_s")
    op.drop_column("programs", "hint_calls")
