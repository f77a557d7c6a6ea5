"""The service a program received before its last anti-starvation promotion, summed over its
promotions. A promotion resets S_p (the scheduler's level), not what the program has received: its
size, what the learned sizes and the size-hint checks count, is this plus S_p.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("programs", sa.Column("promoted_service_s", sa.Float(), nullable=False, server_default="0"))
    op.create_check_constraint("promoted_service", "programs", "promoted_service_s >= 0")


def downgrade() -> None:
    op.drop_constraint("promoted_service", "programs", type_="check")
    op.drop_column("programs", "promoted_service_s")
