"""Process table settings (environment variables, validated): the mesh and database settings plus
SESSION_IDLE_TTL_S, SESSION_EXPIRY_INTERVAL_S, COMPLETION_BATCH_SIZE, DEFAULT_AGGREGATION,
DB_RETRY_BUDGET_S, MIGRATE_ON_START, MLFQ_NUM_LEVELS and MLFQ_BASE_QUANTUM_S."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from services.process_table.db import async_database_url
from shared.core.program import ServiceAggregation
from shared.settings import DatabaseSettings

SERVICE_NAME = "process_table"


class ProcessTableSettings(DatabaseSettings):
    # an open session with no completion, open or promotion for this long is closed as abandoned
    session_idle_ttl_s: float = Field(default=1800.0, gt=0)
    session_expiry_interval_s: float = Field(default=10.0, gt=0)  # how often abandoned ones are swept
    completion_batch_size: int = Field(default=1024, ge=1, le=10_000)  # pulled and applied per transaction
    # PLAS ("sum") or ATLAS ("critical_path") for sessions opened here (OpenSession has no field for it)
    default_aggregation: ServiceAggregation = ServiceAggregation.CRITICAL_PATH
    # session and promotion writes are retried with exponential backoff for this long, then answered
    # with an error (requests) or nak'ed for redelivery (promotions); completion batches are retried
    # until they commit, whatever this says (they are never acknowledged before, never dropped)
    db_retry_budget_s: float = Field(default=10.0, gt=0)
    migrate_on_start: bool = False  # run the Alembic migrations before serving
    # MLFQ levels reported in lookups (the same defaults as the pure core's MlfqConfig)
    mlfq_num_levels: int = Field(default=8, ge=1)
    mlfq_base_quantum_s: float = Field(default=1.0, gt=0)

    @field_validator("database_url", mode="before")
    @classmethod
    def _asyncpg_url(cls, v: Any) -> Any:
        return async_database_url(v) if isinstance(v, str) else v
