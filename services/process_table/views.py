"""What the process table hands out: program views, service updates, and its domain errors."""

from __future__ import annotations

from dataclasses import dataclass


class ProgramNotFound(LookupError):
    def __init__(self, program_id: str) -> None:
        super().__init__(f"no session with id {program_id!r}")
        self.program_id = program_id


class TooManySessions(RuntimeError):
    def __init__(self, tenant_id: str, limit: int) -> None:
        super().__init__(f"tenant {tenant_id!r} has {limit} open sessions, the most allowed "
                         f"(MAX_OPEN_SESSIONS_PER_TENANT); close some first")
        self.tenant_id = tenant_id
        self.limit = limit


class ProgramClosed(RuntimeError):
    def __init__(self, program_id: str) -> None:
        super().__init__(f"session {program_id!r} is closed")
        self.program_id = program_id


@dataclass(frozen=True)
class ProgramView:
    """A program row as the rest of the mesh sees it (lookups, updates)."""

    program_id: str
    tenant_id: str
    name: str
    workload_class: str
    aggregation: str
    state: str
    close_reason: str | None
    service_s: float
    wait_s: float
    epoch: int
    promotions: int
    num_completed_calls: int
    primary_engine: str | None
    created_at_s: float
    last_active_at_s: float
    closed_at_s: float | None
    thread_service_s: dict[str, float]
    hint_calls: int | None = None  # the client's first remaining-calls hint (None: never hinted)
    hint_service_s: float | None = None  # total service when that hint came
    promoted_service_s: float = 0.0  # service before the last promotion, summed over promotions

    @property
    def total_service_s(self) -> float:
        """What the program has received, across promotions (S_p restarts at each): its size."""
        return self.promoted_service_s + self.service_s


@dataclass(frozen=True)
class ServiceUpdate:
    """What changed in one program after a committed batch (published as an update event)."""

    program_id: str
    service_s: float
    wait_s: float
    epoch: int
    promotions: int
    num_completed_calls: int
    thread_service_s: dict[str, float]  # threads changed by this batch
    applied_call_ids: list[str]


PROGRAM_COLUMNS = """p.id, p.tenant_id, p.name, p.workload_class, p.aggregation, p.state, p.close_reason,
    p.service_s, p.wait_s, p.epoch, p.promotions, p.num_completed_calls, p.primary_engine,
    p.hint_calls, p.hint_service_s, p.promoted_service_s,
    extract(epoch FROM p.created_at)::float8 AS created_at_s,
    extract(epoch FROM p.last_active_at)::float8 AS last_active_at_s,
    extract(epoch FROM p.closed_at)::float8 AS closed_at_s"""


def program_view(row, threads: dict[str, float]) -> ProgramView:
    """Build a view from a row selected with PROGRAM_COLUMNS."""
    return ProgramView(
        program_id=row.id, tenant_id=row.tenant_id, name=row.name, workload_class=row.workload_class,
        aggregation=row.aggregation, state=row.state, close_reason=row.close_reason,
        service_s=row.service_s, wait_s=row.wait_s, epoch=row.epoch, promotions=row.promotions,
        num_completed_calls=row.num_completed_calls, primary_engine=row.primary_engine,
        created_at_s=row.created_at_s, last_active_at_s=row.last_active_at_s, closed_at_s=row.closed_at_s,
        thread_service_s=threads, hint_calls=row.hint_calls, hint_service_s=row.hint_service_s,
        promoted_service_s=row.promoted_service_s,
    )
