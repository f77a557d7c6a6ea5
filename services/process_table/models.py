"""SQLAlchemy 2 models of the global process table: tenants, programs (sessions), threads, calls.

The schema is owned by the Alembic migrations in `migrations/`; these classes describe it for
queries. Service and wait are float seconds (float8), as in the pure core's `ProgramLedger`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from shared.core.program import ServiceAggregation

# a program first seen in a completion (nobody opened it here) gets this; it is the column default
AUTO_CREATED_AGGREGATION = ServiceAggregation.CRITICAL_PATH

# Deterministic constraint names so migrations can drop what they created.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class ProgramState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class CloseReason(StrEnum):
    CLIENT = "client"  # closed on request
    IDLE_TTL = "idle_ttl"  # abandoned: no activity within the idle TTL


class CallState(StrEnum):
    COMPLETED = "completed"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _now_column() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    created_at: Mapped[datetime] = _now_column()


class Program(Base):
    """One agent program = one session. S_p, W_p and the promotion epoch live here."""

    __tablename__ = "programs"
    __table_args__ = (
        CheckConstraint("state IN ('open', 'closed')", name="state"),
        CheckConstraint("aggregation IN ('sum', 'critical_path')", name="aggregation"),
        CheckConstraint("service_s >= 0 AND wait_s >= 0", name="nonnegative"),
        CheckConstraint("promoted_service_s >= 0", name="promoted_service"),
        CheckConstraint("(hint_calls IS NULL) = (hint_service_s IS NULL) "
                        "AND (hint_calls IS NULL OR (hint_calls >= 1 AND hint_service_s >= 0))", name="hint"),
        # the idle-expiry sweep scans open programs by last activity
        Index("ix_programs_open_last_active", "last_active_at", postgresql_where=text("state = 'open'")),
        # the open-sessions cap counts a tenant's open sessions (sessionless one-call programs aside)
        Index("ix_programs_open_sessions_by_tenant", "tenant_id",
              postgresql_where=text("state = 'open' AND id NOT LIKE 'call-%'")),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    workload_class: Mapped[str] = mapped_column(String(64), nullable=False, server_default="")
    aggregation: Mapped[str] = mapped_column(String(16), nullable=False,
                                             server_default=AUTO_CREATED_AGGREGATION.value)
    state: Mapped[str] = mapped_column(String(16), nullable=False, server_default="open")
    close_reason: Mapped[str | None] = mapped_column(String(32))
    service_s: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
    wait_s: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
    epoch: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    promotions: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    # service before the last promotion, summed: with service_s, what the program has received
    promoted_service_s: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
    num_completed_calls: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    primary_engine: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now_column()
    last_active_at: Mapped[datetime] = _now_column()
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the client's first remaining-calls hint and the program's total service when it came
    # (shared/core/size_hints.py)
    hint_calls: Mapped[int | None] = mapped_column(Integer)
    hint_service_s: Mapped[float | None] = mapped_column(Float)


class Thread(Base):
    """ATLAS thread service s_T; a forked thread starts from its parent's s_T at the fork."""

    __tablename__ = "threads"

    program_id: Mapped[str] = mapped_column(
        ForeignKey("programs.id", ondelete="CASCADE"), primary_key=True
    )
    thread_id: Mapped[str] = mapped_column(Text, primary_key=True)
    parent_thread_id: Mapped[str | None] = mapped_column(Text)
    service_s: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")


class Call(Base):
    """A completed call; its primary key is what makes completion events idempotent."""

    __tablename__ = "calls"
    # no secondary index: nothing reads calls by program, and each index costs every insert

    call_id: Mapped[str] = mapped_column(Text, primary_key=True)
    # no foreign key: written in the same transaction that creates the program (see migration 0001)
    program_id: Mapped[str] = mapped_column(Text, nullable=False)
    thread_id: Mapped[str] = mapped_column(Text, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False, server_default="completed")
    service_s: Mapped[float] = mapped_column(Float, nullable=False)
    wait_s: Mapped[float] = mapped_column(Float, nullable=False)
    prompt_tokens: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    output_tokens: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    prefix_hit_tokens: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    engine_id: Mapped[str | None] = mapped_column(Text)
    submit_epoch: Mapped[int | None] = mapped_column(Integer)
    thread_service_at_submit_s: Mapped[float | None] = mapped_column(Float)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    applied_at: Mapped[datetime] = _now_column()
