"""Pure fold of call completions into program rows, using the core's `ProgramLedger` itself.

The repository loads the rows a batch touches, calls `fold_completions` per program, and writes
back what changed; so the database applies exactly the core's PLAS/ATLAS arithmetic (sum, or
S_p = max(S_p, s_T(at submit) + t_call); forks start from the parent's s_T, other new threads from S_p; a stale submit epoch
after a promotion falls back to the thread's current s_T). Duplicates are removed before the fold
by the calls table's primary key. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.core.program import ProgramLedger, ServiceAggregation
from shared.protocol.ids import DEFAULT_TENANT_ID

__all__ = ["Completion", "ProgramRow", "FoldResult", "fold_completions"]


@dataclass(slots=True)
class Completion:
    """One completed call as the process table needs it, made from a `CallCompleted` the codec has
    held to the wire's bounds (shared/protocol/bounds.py: ids, finite non-negative durations, counts
    within the 32-bit columns), which are the table's: they are checked there once, not again here."""

    call_id: str
    program_id: str
    thread_id: str
    service_s: float
    wait_s: float
    parent_thread_id: str | None = None  # set on a thread's first call: fork from the parent
    tenant_id: str = DEFAULT_TENANT_ID  # owner of a program that nobody opened before
    thread_service_at_submit_s: float | None = None
    submit_epoch: int | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    prefix_hit_tokens: int = 0
    engine_id: str | None = None
    completed_at_s: float | None = None
    completed_calls_before: int | None = None  # the client's order (client_order.py)
    may_wait: bool = True  # False once held back long enough: fold as it is



@dataclass
class ProgramRow:
    """The columns of `programs` the fold reads and writes, plus the touched threads' s_T."""

    program_id: str
    aggregation: ServiceAggregation
    service_s: float = 0.0
    wait_s: float = 0.0
    epoch: int = 0
    promotions: int = 0
    num_completed_calls: int = 0
    thread_service_s: dict[str, float] = field(default_factory=dict)  # only threads the batch needs


@dataclass
class FoldResult:
    row: ProgramRow
    # thread id -> (s_T after the batch, parent thread id recorded when the thread was created)
    changed_threads: dict[str, tuple[float, str | None]]


def fold_completions(row: ProgramRow, completions: list[Completion]) -> FoldResult:
    """Apply fresh (already de-duplicated) completions of one program, in order."""
    ledger = ProgramLedger(
        program_id=row.program_id,
        service_s=row.service_s,
        wait_s=row.wait_s,
        thread_service_s=dict(row.thread_service_s),
        promotions=row.promotions,
        epoch=row.epoch,
    )
    parents: dict[str, str | None] = {}
    touched: set[str] = set()
    applied = 0
    for c in completions:
        if c.program_id != row.program_id:
            raise ValueError(f"call {c.call_id} belongs to {c.program_id}, not {row.program_id}")
        # a fork from a parent starts from the parent's service; a parentless new thread's base
        # (S_p at submit, the core's rule) comes with the completion, so folding stays order-free
        if c.parent_thread_id is not None and c.thread_id not in ledger.thread_service_s:
            ledger.fork_thread(c.thread_id, c.parent_thread_id)
            parents[c.thread_id] = c.parent_thread_id
        if ledger.complete_call(c.call_id, c.thread_id, c.service_s, c.wait_s,
                                c.thread_service_at_submit_s, row.aggregation, c.submit_epoch):
            applied += 1
            touched.add(c.thread_id)
    new_row = ProgramRow(
        program_id=row.program_id,
        aggregation=row.aggregation,
        service_s=ledger.service_s,
        wait_s=ledger.wait_s,
        epoch=ledger.epoch,
        promotions=ledger.promotions,
        num_completed_calls=row.num_completed_calls + applied,
        thread_service_s=ledger.thread_service_s,
    )
    changed = {t: (ledger.thread_service_s[t], parents.get(t)) for t in touched | set(parents)}
    return FoldResult(row=new_row, changed_threads=changed)
