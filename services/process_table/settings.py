"""Process table settings (environment variables, validated): the mesh and database settings plus
SESSION_IDLE_TTL_S, SESSION_EXPIRY_INTERVAL_S, COMPLETION_BATCH_SIZE, COMPLETION_PIPELINE_DEPTH,
LEAN_PULL, DEFAULT_AGGREGATION, DB_RETRY_BUDGET_S, MLFQ_NUM_LEVELS and MLFQ_BASE_QUANTUM_S;
FAULT_EXIT_AFTER_COMMITS is fault injection for `autellix chaos` only."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from services.policy_setting import DEFAULT_POLICY, PolicySetting
from services.process_table.db import async_database_url
from shared.core.policy import SchedulingPolicy
from shared.core.program import ServiceAggregation
from shared.settings import DatabaseSettings

SERVICE_NAME = "process_table"


class ProcessTableSettings(DatabaseSettings):
    env_prefixes: ClassVar[tuple[str, ...]] = ("AUTELLIX_", "DATABASE_", "DB_", "MLFQ_", "SESSION_", "FAULT_")
    # an open session with no completion, open or promotion for this long is closed as abandoned
    session_idle_ttl_s: float = Field(default=1800.0, gt=0)
    session_expiry_interval_s: float = Field(default=10.0, gt=0)  # how often abandoned ones are swept
    # pulled and applied per transaction (at most: a batch is what has arrived). 4096 rather than 1024:
    # per-batch costs (a commit, one row update and one update event per program) amortise over 4x
    # the events; measured, table CPU per event -10 to -26%, database time per event -24 to -40%
    completion_batch_size: int = Field(default=4096, ge=1, le=10_000)
    # completion batches in the database at once under a backlog (a full batch waiting): the next
    # folds on the rows the one in flight is writing and its statement goes out at once, so
    # PostgreSQL works on one while the other commits. Measured (docs/results/process_table_drain,
    # 8 Dec): drain 0.444x -> 0.493x of the batched-upsert ceiling, cores busy 0.77 -> 0.86.
    # 1: one batch at a time
    completion_pipeline_depth: int = Field(default=2, ge=1, le=4)
    # how a program's service folds follows the policy the engines run (one setting for both);
    # DEFAULT_AGGREGATION may only say the same thing ("sum" or "critical_path")
    scheduling_policy: PolicySetting = DEFAULT_POLICY
    default_aggregation: ServiceAggregation | None = None
    # session and promotion writes are retried with exponential backoff for this long, then answered
    # with an error (requests) or nak'ed for redelivery (promotions); completion batches are retried
    # until they commit, whatever this says (they are never acknowledged before, never dropped)
    db_retry_budget_s: float = Field(default=10.0, gt=0)
    # a tenant's open sessions, at most (opening one more is refused until some close or expire);
    # shared by every API worker and replica, since the table counts them; 0: no cap
    max_open_sessions_per_tenant: int = Field(default=10_000, ge=0)
    # the completions arrive on a connection of the consumer's own, parsed and acked a batch at a time
    # (shared/bus/lean_link.py): 3.4-4.1 us of CPU per message against nats-py's 12.3-13.0 (pull_paths). False:
    # through the process's nats-py client, as every other consumer. Websocket URLs always take that.
    lean_pull: bool = True
    # MLFQ levels reported in lookups (the same defaults as the pure core's MlfqConfig)
    mlfq_num_levels: int = Field(default=8, ge=1)
    mlfq_base_quantum_s: float = Field(default=1.0, gt=0)
    # chaos: the process exits right after its Nth committed batch, before publishing its updates or
    # acking (the crash between commit and publish that republish.py recovers from); 0: never
    fault_exit_after_commits: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _one_policy(self) -> ProcessTableSettings:
        implied = SchedulingPolicy(self.scheduling_policy).aggregation
        if self.default_aggregation is not None and self.default_aggregation is not implied:
            raise ValueError(f"DEFAULT_AGGREGATION={self.default_aggregation.value} contradicts "
                             f"SCHEDULING_POLICY={self.scheduling_policy.value}, which folds service as "
                             f"{implied.value}; set only SCHEDULING_POLICY")
        return self

    @property
    def aggregation(self) -> ServiceAggregation:
        """How sessions opened here fold their calls' service (OpenSession has no field for it)."""
        return SchedulingPolicy(self.scheduling_policy).aggregation

    @field_validator("database_url", mode="before")
    @classmethod
    def _asyncpg_url(cls, v: Any) -> Any:
        return async_database_url(v) if isinstance(v, str) else v
