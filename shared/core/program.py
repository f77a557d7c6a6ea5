"""Program-level service accounting (PLAS and ATLAS) as a pure state object.

The process table applies these same transitions in PostgreSQL; the simulator and the engines
keep them in memory. Every transition is idempotent by call id.

Threads (ATLAS), one rule for every owner of a ledger (simulator, engines, process table): a
thread forked from a thread the program has starts from that parent's service (`fork_thread`);
any other new thread (no parent, or a parent the program does not have) starts from the
program's current service S_p, a fork from the critical path, and `thread_service` of a thread
not created yet already answers that S_p, so an owner that reads a new thread's service at
submit gets the same base without forking. A client therefore cannot reset its program's
service by naming fresh thread ids: a new thread continues the program's longest one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from shared.lru import LRU

# call ids a ledger remembers to refuse a duplicate completion: a redelivery comes soon after the
# original (within a batch or an ack wait), and a long-lived session must not grow an engine's
# memory by every call it ever made (the process table, which owns the count, dedupes by its rows)
MAX_REMEMBERED_CALL_IDS = 4096


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
    completed_call_ids: LRU[str, None] = field(default_factory=lambda: LRU(MAX_REMEMBERED_CALL_IDS))
    num_completed_calls: int = 0
    promotions: int = 0
    # service received before the last promotion, summed over promotions: a promotion resets S_p
    # (the scheduler's level), not what the program has received (its size: total_service_s)
    promoted_service_s: float = 0.0
    # bumped on every promotion so engines can tell that level-relevant state was reset
    epoch: int = 0
    # bumped by every transition (a completion folded, a promotion, the table's state taken): what
    # a reader compares to know the ledger changed since it last looked
    version: int = 0

    @property
    def total_service_s(self) -> float:
        """All the service the program has received, across promotions (what size estimates count)."""
        return self.promoted_service_s + self.service_s

    def thread_service(self, thread_id: str) -> float:
        """s_T; for a thread the program does not have yet, the S_p it would start from (`fork_thread`)."""
        return self.thread_service_s.get(thread_id, self.service_s)

    def fork_thread(self, thread_id: str, parent_thread_id: str | None) -> None:
        """Create `thread_id` if it is new: from its parent's service when the parent is one of the
        program's threads, else from the program's service (the critical path). No-op for a known thread."""
        if thread_id in self.thread_service_s:
            return
        parent_service = self.thread_service_s.get(parent_thread_id) if parent_thread_id is not None else None
        self.thread_service_s[thread_id] = self.service_s if parent_service is None else parent_service

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
        self.completed_call_ids.put(call_id, None)
        self.num_completed_calls += 1
        self.version += 1
        self.wait_s += wait_s
        stale = submit_epoch is not None and submit_epoch != self.epoch  # promoted since submit
        if thread_service_at_submit_s is None or stale:
            base = self.thread_service(thread_id)
        else:
            base = thread_service_at_submit_s
        thread_total = base + service_s
        # the thread's recorded value, not the S_p a new one would start from: with the base given
        # at submit, the fold does not depend on the order completions arrive in
        self.thread_service_s[thread_id] = max(self.thread_service_s.get(thread_id, 0.0), thread_total)
        if aggregation is ServiceAggregation.SUM:
            self.service_s += service_s
        else:
            self.service_s = max(self.service_s, thread_total)
        return True

    def promote(self) -> None:
        """Anti-starvation promotion: reset W and S (and thread services) to break oscillation."""
        self.promoted_service_s += self.service_s
        self.service_s = 0.0
        self.wait_s = 0.0
        self.thread_service_s = {t: 0.0 for t in self.thread_service_s}
        self.promotions += 1
        self.epoch += 1
        self.version += 1

    def take_table_state(self, service_s: float, wait_s: float, thread_service_s: dict[str, float],
                         epoch: int, num_completed_calls: int = 0) -> bool:
        """Adopt the process table's published state (it owns the truth) unless it is older than
        the one held, by (epoch, completed calls): from before a promotion this ledger knows of, or
        with fewer completions in the same epoch (reordered or replayed). False if refused.
        `thread_service_s` carries the threads that changed."""
        if (epoch, num_completed_calls) < (self.epoch, self.num_completed_calls):
            return False
        if epoch > self.epoch:  # a promotion not seen here: its reset comes first
            self.thread_service_s = {t: 0.0 for t in self.thread_service_s}
        self.service_s = service_s
        self.wait_s = wait_s
        self.thread_service_s.update(thread_service_s)
        self.epoch = epoch
        self.num_completed_calls = num_completed_calls
        self.version += 1
        return True
