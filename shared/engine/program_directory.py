"""A read-only view of program state (S_p, W_p, s_T, epoch): the engine agent's ProgramDirectory,
and the controller's view of the programs it may promote (services/controller/cluster_view.py),
so both take the table's updates and closes by the same rules.

The process table owns the truth: it applies every transition (completions and promotions) and
publishes the program's state after each. This view only takes those states, versioned by
(epoch, completed calls): an update older than the one it holds (from before a promotion it has
seen, or with fewer completions in the same epoch: reordered or replayed) changes nothing. Between
a completion and the update that follows it (milliseconds: `bench process-table`'s propagation),
a program's next call is ordered on the state before it, and the engine re-reads the program's key
when the update lands (the ledger's `version` moves). What the view writes of its own is a
thread's starting point when a call forks it here (`fork_thread`, idempotent), which the table
records from the call's submit base.

Memory tracks open programs, not history: a program is forgotten when its session closes or
expires (`close`) and when the one call of a one-call program completes here. A late update of
a forgotten program (a completion applied after the close) does not bring it back: closed ids
are remembered in a bounded list, and a one-call program is recognised by its id. The LRU bound
on ledgers stays as a backstop (e.g. a program whose call was cancelled here).
"""

from __future__ import annotations

from collections.abc import Iterator

from shared.core.program import ProgramLedger, ServiceAggregation
from shared.lru import LRU
from shared.protocol.programs import is_one_call_program, one_call_program_id


class CachedProgramDirectory:
    def __init__(self, aggregation: ServiceAggregation, capacity: int = 100_000,
                 closed_capacity: int = 16_384) -> None:
        self.aggregation = aggregation  # how the table folds this view's programs (its engines' policy)
        self._ledgers: LRU[str, ProgramLedger] = LRU(capacity)
        # recently closed programs (updates of their last calls still arrive for a few seconds);
        # bounded by count: at 50 closes a second this remembers the last 5 minutes
        self._closed: LRU[str, None] = LRU(closed_capacity)

    def ledger(self, program_id: str) -> ProgramLedger:
        led = self._ledgers.touch(program_id)
        if led is None:
            led = ProgramLedger(program_id)
            self._ledgers.put(program_id, led)
        return led

    def get(self, program_id: str) -> ProgramLedger | None:
        """The program's ledger if this view holds it (nothing created, recency unchanged)."""
        return self._ledgers.get(program_id)

    def apply_update(self, program_id: str, service_s: float, wait_s: float,
                     thread_service_s: dict[str, float], epoch: int, num_completed_calls: int = 0) -> bool:
        """Take the process table's state unless it is older than the one held; one of a program
        that has ended (and is not held here) is ignored. True if taken."""
        if self._ended(program_id):
            return False
        # a call that completed anywhere is known here only through this update: the ledger's
        # version moves, so engines re-read the program's priority
        return self.ledger(program_id).take_table_state(service_s, wait_s, thread_service_s, epoch,
                                                        num_completed_calls)

    def call_finished(self, program_id: str, call_id: str) -> None:
        """A call of the program finished here: its only call, or a call of a closed session that
        was still running here, leaves nothing to keep (another call of that session still here
        re-creates the ledger and is forgotten in turn)."""
        if program_id == one_call_program_id(call_id) or program_id in self._closed:
            self.forget(program_id)

    def view_is_behind(self, program_id: str, completed_calls_before: int | None) -> bool:
        """The client had seen more of the program's calls complete than this view's table state holds."""
        return completed_calls_before is not None and self.num_completed(program_id) < completed_calls_before

    def num_completed(self, program_id: str) -> int:
        """Completions of the program in the table state this view holds."""
        led = self._ledgers.get(program_id)
        return 0 if led is None else led.num_completed_calls

    def close(self, program_id: str) -> None:
        """The program's session closed or expired: forget it, and ignore its late updates."""
        self.forget(program_id)
        self._closed.put(program_id, None)

    def forget(self, program_id: str) -> None:
        self._ledgers.pop(program_id, None)

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
