"""process_table_require(ok, what): abort the current statement with SQLSTATE PT001 unless ok.

The one-statement fast path of the completion apply checks its assumptions (every call fresh, every
program still at the cached version) at the end of the statement and aborts it as a whole if one
does not hold; the caller then takes the general path.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE FUNCTION process_table_require(ok boolean, what text) RETURNS boolean
        LANGUAGE plpgsql AS $$
        BEGIN
            IF ok IS NOT TRUE THEN
                RAISE EXCEPTION USING ERRCODE = 'PT001', MESSAGE = what;
            END IF;
            RETURN true;
        END $$""")


def downgrade() -> None:
    op.execute("DROP FUNCTION process_table_require(boolean, text)")
