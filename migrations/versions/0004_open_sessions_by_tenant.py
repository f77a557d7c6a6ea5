"""Index a tenant's open sessions: the process table counts them to cap them
(MAX_OPEN_SESSIONS_PER_TENANT); sessionless one-call programs are not counted.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_programs_open_sessions_by_tenant", "programs", ["tenant_id"],
                    postgresql_where=sa.text("state = 'open' AND id NOT LIKE 'call-%'"))


def downgrade() -> None:
    op.drop_index("ix_programs_open_sessions_by_tenant", table_name="programs")
