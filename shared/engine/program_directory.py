"""A read-only view of program state (S_p, W_p, s_T, epoch): the engine agent's ProgramDirectory,
and the controller's view of the programs it may promote (services/controller/cluster_view.py),
so both apply the table's updates, promotions and closes by the same rules.

The process table owns the truth and publishes program-service updates; the cache applies them
whole. Between a local completion and the update that follows it (milliseconds), the agent folds
the completion in locally too, idempotent by call id, so its next call of that program already
sees the new service. A promotion resets the ledger as the core prescribes.

Memory tracks open programs, not history: a program is forgotten when its session closes or
expires (`close`) and when the one call of a one-call program completes here. A late update of
a forgotten program (a completion applied after the close) does not bring it back: closed ids
are remembered in a bounded list, and a one-call program is recognised by its id. The LRU bound
on ledgers stays as a backstop (e.g. a program whose call was cancelled here).
"""

from __future__ import annotations

from collections.abc import Iterator

from shared.core.program import ProgramLedger, ServiceAggregation
from shared.engine.api import CallCompletion
from shared.lru import LRU
from shared.protocol.programs import is_one_call_program, one_call_program_id


class CachedProgramDirectory:
    def __init__(self, aggregation: ServiceAggregation, capacity: int = 100_000,
                 closed_capacity: int = 16_384) -> None:
        self.aggregation = aggregation
        self._ledgers: LRU[str, ProgramLedger] = LRU(capacity)
        # recently closed programs (updates of their last calls still arrive for a few seconds);
        # bounded by count: at 50 closes a second this remembers the last 5 minutes
        self._closed: LRU[str, None] = LRU(closed_capacity)
        # completions of each held program this view has folded (the table's count from its
        # updates, raised by local completions): compared with the API's count to tell a stale view
        self._completed: dict[str, int] = {}

    def ledger(self, program_id: str) -> ProgramLedger:
        led = self._ledgers.touch(program_id)
        if led is None:
            led = ProgramLedger(program_id)
            for evicted, _ in self._ledgers.put(program_id, led):
                self._completed.pop(evicted, None)
        return led

    def get(self, program_id: str) -> ProgramLedger | None:
        """The program's ledger if this view holds it (nothing created, recency unchanged)."""
        return self._ledgers.get(program_id)

    def promote(self, program_id: str) -> None:
        self.ledger(program_id).promote()

    def apply_update(self, program_id: str, service_s: float, wait_s: float,
                     thread_service_s: dict[str, float], epoch: int, num_completed_calls: int = 0) -> bool:
        """Take the process table's state; an update from before a promotion we know of is stale,
        and one of a program that has ended (and is not held here) is ignored."""
        if self._ended(program_id):
            return False
        # a call that completed on another engine is known here only through this update: the
        # ledger's version moves, so engines re-read the program's priority
        if not self.ledger(program_id).take_table_state(service_s, wait_s, thread_service_s, epoch):
            return False
        self._completed[program_id] = max(self._completed.get(program_id, 0), num_completed_calls)
        return True

    def apply_promotion(self, program_id: str, epoch: int | None) -> bool:
        if self._ended(program_id):
            return False
        led = self.ledger(program_id)
        if epoch is not None and epoch <= led.epoch:
            return False  # already applied (the update carrying it may have come first)
        led.promote()
        if epoch is not None:
            led.epoch = epoch
        return True

    def fold_completion(self, done: CallCompletion) -> None:
        if self.ledger(done.program_id).complete_call(
                done.call_id, done.thread_id, done.service_s, done.wait_s, done.thread_service_at_submit_s,
                self.aggregation, done.submit_epoch):
            self._completed[done.program_id] = self._completed.get(done.program_id, 0) + 1
        if done.program_id == one_call_program_id(done.call_id) or done.program_id in self._closed:
            # its only call, or a call of a closed session that was still running here; another
            # call of that session still here re-creates the ledger and is forgotten in turn
            self.forget(done.program_id)

    def view_is_behind(self, program_id: str, completed_calls_before: int | None) -> bool:
        """The client had seen more of the program's calls complete than this view has folded."""
        return completed_calls_before is not None and self._completed.get(program_id, 0) < completed_calls_before

    def num_completed(self, program_id: str) -> int:
        """Completions of the program this view has folded."""
        return self._completed.get(program_id, 0)

    def close(self, program_id: str) -> None:
        """The program's session closed or expired: forget it, and ignore its late updates."""
        self.forget(program_id)
        self._closed.put(program_id, None)

    def forget(self, program_id: str) -> None:
        self._ledgers.pop(program_id, None)
        self._completed.pop(program_id, None)

    def has_ended(self, program_id: str) -> bool:
        """Its session closed (as far as this view remembers), or it is a one-call program, whose
        update always follows its only completion."""
        return program_id in self._closed or is_one_call_program(program_id)

    def _ended(self, program_id: str) -> bool:
        """Nothing here needs the program any more: it is not held, and it has ended."""
        return program_id not in self._ledgers and self.has_ended(program_id)

    @property
    def num_closed_remembered(self) -> int:
        return len(self._closed)

    def __len__(self) -> int:
        return len(self._ledgers)

    def __contains__(self, program_id: object) -> bool:
        return program_id in self._ledgers

    def __iter__(self) -> Iterator[str]:
        """The ids of the programs held, least recently used first."""
        return iter(self._ledgers)
