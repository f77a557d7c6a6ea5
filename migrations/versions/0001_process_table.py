"""Process table: tenants, programs (sessions), threads, calls.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _now() -> sa.sql.elements.TextClause:
    return sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tenants"),
    )
    # completions may name a program nobody opened here (the session API opened it elsewhere);
    # such programs belong to the default tenant
    op.execute("INSERT INTO tenants (id, name) VALUES ('default', 'default tenant')")
    op.create_table(
        "programs",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), server_default="", nullable=False),
        sa.Column("workload_class", sa.String(64), server_default="", nullable=False),
        sa.Column("aggregation", sa.String(16), server_default="critical_path", nullable=False),
        sa.Column("state", sa.String(16), server_default="open", nullable=False),
        sa.Column("close_reason", sa.String(32), nullable=True),
        sa.Column("service_s", sa.Float(), server_default="0", nullable=False),
        sa.Column("wait_s", sa.Float(), server_default="0", nullable=False),
        sa.Column("epoch", sa.Integer(), server_default="0", nullable=False),
        sa.Column("promotions", sa.Integer(), server_default="0", nullable=False),
        sa.Column("num_completed_calls", sa.Integer(), server_default="0", nullable=False),
        sa.Column("primary_engine", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.Column("last_active_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('open', 'closed')", name="ck_programs_state"),
        sa.CheckConstraint("aggregation IN ('sum', 'critical_path')", name="ck_programs_aggregation"),
        sa.CheckConstraint("service_s >= 0 AND wait_s >= 0", name="ck_programs_nonnegative"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name="fk_programs_tenant_id_tenants"),
        sa.PrimaryKeyConstraint("id", name="pk_programs"),
    )
    op.create_index("ix_programs_open_last_active", "programs", ["last_active_at"],
                    postgresql_where=sa.text("state = 'open'"))
    op.create_table(
        "threads",
        sa.Column("program_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("parent_thread_id", sa.Text(), nullable=True),
        sa.Column("service_s", sa.Float(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(["program_id"], ["programs.id"], ondelete="CASCADE",
                                name="fk_threads_program_id_programs"),
        sa.PrimaryKeyConstraint("program_id", "thread_id", name="pk_threads"),
    )
    op.create_table(
        "calls",
        sa.Column("call_id", sa.Text(), nullable=False),
        sa.Column("program_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), server_default="completed", nullable=False),
        sa.Column("service_s", sa.Float(), nullable=False),
        sa.Column("wait_s", sa.Float(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("output_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("prefix_hit_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("engine_id", sa.Text(), nullable=True),
        sa.Column("submit_epoch", sa.Integer(), nullable=True),
        sa.Column("thread_service_at_submit_s", sa.Float(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("applied_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        # no foreign key to programs: the row is written in the transaction that creates the program,
        # and the per-row check cost a third of the insert time on the completion path (measured)
        sa.PrimaryKeyConstraint("call_id", name="pk_calls"),
    )
    # calls is append-only on the completion hot path and read only by primary key (idempotency):
    # no secondary index until a query needs one


def downgrade() -> None:
    op.drop_table("calls")
    op.drop_table("threads")
    op.drop_index("ix_programs_open_last_active", table_name="programs")
    op.drop_table("programs")
    op.drop_table("tenants")
