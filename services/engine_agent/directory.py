"""The engine agent's ProgramDirectory: a local cache of program state (S_p, W_p, s_T).

The process table owns the truth and publishes program-service updates; the cache applies them
whole. Between a local completion and the update that follows it (milliseconds), the agent folds
the completion in locally too, idempotent by call id, so its next call of that program already
sees the new service. A promotion resets the ledger as the core prescribes.
"""

from __future__ import annotations

from collections import OrderedDict

from shared.core.program import ProgramLedger, ServiceAggregation
from shared.engine.api import CallCompletion


class CachedProgramDirectory:
    def __init__(self, aggregation: ServiceAggregation, capacity: int = 100_000) -> None:
        self.aggregation = aggregation
        self._ledgers: OrderedDict[str, ProgramLedger] = OrderedDict()
        self._capacity = capacity

    def ledger(self, program_id: str) -> ProgramLedger:
        led = self._ledgers.get(program_id)
        if led is None:
            led = self._ledgers[program_id] = ProgramLedger(program_id)
            while len(self._ledgers) > self._capacity:
                self._ledgers.popitem(last=False)
        else:
            self._ledgers.move_to_end(program_id)
        return led

    def promote(self, program_id: str) -> None:
        self.ledger(program_id).promote()

    def apply_update(self, program_id: str, service_s: float, wait_s: float,
                     thread_service_s: dict[str, float], epoch: int, num_completed_calls: int = 0) -> bool:
        """Take the process table's state; an update from before a promotion we know of is stale."""
        led = self.ledger(program_id)
        if epoch < led.epoch:
            return False
        # engines re-read a program's priority when its (epoch, completed count) changes; a call
        # that completed on another engine is known here only through this update, so count it
        led.completed_call_ids.add(f"table:{epoch}:{num_completed_calls}")
        if epoch > led.epoch:  # a promotion we had not seen: its reset comes first
            led.thread_service_s = {t: 0.0 for t in led.thread_service_s}
        led.service_s = service_s
        led.wait_s = wait_s
        led.thread_service_s.update(thread_service_s)  # updates carry the threads that changed
        led.epoch = epoch
        return True

    def apply_promotion(self, program_id: str, epoch: int | None) -> bool:
        led = self.ledger(program_id)
        if epoch is not None and epoch <= led.epoch:
            return False  # already applied (the update carrying it may have come first)
        led.promote()
        if epoch is not None:
            led.epoch = epoch
        return True

    def fold_completion(self, done: CallCompletion) -> None:
        self.ledger(done.program_id).complete_call(
            done.call_id, done.thread_id, done.service_s, done.wait_s, done.thread_service_at_submit_s,
            self.aggregation, done.submit_epoch)

    def forget(self, program_id: str) -> None:
        self._ledgers.pop(program_id, None)

    def __len__(self) -> int:
        return len(self._ledgers)
