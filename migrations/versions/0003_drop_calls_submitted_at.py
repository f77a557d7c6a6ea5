"""Drop calls.submitted_at: nothing ever filled it.

A call's completion (CallCompleted) carries its wait, service and completion time but not when the
API accepted it, so every row held NULL; the submission time lives in the audit stream's
`call.submitted` event. Downgrade restores the empty column.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_column("calls", "submitted_at")


def downgrade() -> None:
    op.add_column("calls", sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True))
