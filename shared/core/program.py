"""Program-level service accounting (PLAS and ATLAS) as a pure state object.

The process table applies these same transitions in PostgreSQL; the simulator and the engines
keep them in memory. Every transition is idempotent by call id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ServiceAggregation(StrEnum):
    """How a completed call's service folds into its program's service."""

    SUM = "sum"  # PLAS: S_p = sum of completed calls' service
    CRITICAL_PATH = "critical_path"  # ATLAS: S_p = max over threads of thread service


ROOT_THREAD = "main"


@dataclass
class ProgramLedger:
    """Attained service S_p, wait W_p and per-thread service s_T of one program."""

    program_id: str
    service_s: float = 0.0
    wait_s: float = 0.0
    thread_service_s: dict[str, float] = field(default_factory=dict)
    completed_call_ids: set[str] = field(default_factory=set)
    promotions: int = 0
    # bumped on every promotion so engines can tell that level-relevant state was reset
    epoch: int = 0

    def thread_service(self, thread_id: str) -> float:
        return self.thread_service_s.get(thread_id, 0.0)

    def fork_thread(self, thread_id: str, parent_thread_id: str | None) -> None:
        """A forked thread starts from its parent's service at the fork (ATLAS)."""
        if thread_id in self.thread_service_s:
            return
        parent = parent_thread_id if parent_thread_id is not None else ROOT_THREAD
        self.thread_service_s[thread_id] = self.thread_service(parent)

    def complete_call(
        self,
        call_id: str,
        thread_id: str,
        service_s: float,
        wait_s: float,
        thread_service_at_submit_s: float | None,
        aggregation: ServiceAggregation,
        submit_epoch: int | None = None,
    ) -> bool:
        """Fold one completed call in; returns False (and changes nothing) for a duplicate."""
        if service_s < 0 or wait_s < 0:
            raise ValueError(f"negative service or wait for call {call_id}: {service_s}, {wait_s}")
        if call_id in self.completed_call_ids:
            return False
        self.completed_call_ids.add(call_id)
        self.wait_s += wait_s
        stale = submit_epoch is not None and submit_epoch != self.epoch  # promoted since submit
        if thread_service_at_submit_s is None or stale:
            base = self.thread_service(thread_id)
        else:
            base = thread_service_at_submit_s
        thread_total = base + service_s
        self.thread_service_s[thread_id] = max(self.thread_service(thread_id), thread_total)
        if aggregation is ServiceAggregation.SUM:
            self.service_s += service_s
        else:
            self.service_s = max(self.service_s, thread_total)
        return True

    def promote(self) -> None:
        """Anti-starvation promotion: reset W and S (and thread services) to break oscillation."""
        self.service_s = 0.0
        self.wait_s = 0.0
        self.thread_service_s = {t: 0.0 for t in self.thread_service_s}
        self.promotions += 1
        self.epoch += 1
