"""Pure fold of call completions into program rows, using the core's `ProgramLedger` itself.

The repository loads the rows a batch touches, calls `fold_completions` per program, and writes
back what changed; so the database applies exactly the core's PLAS/ATLAS arithmetic (sum, or
S_p = max(S_p, s_T(at submit) + t_call); forks start from the parent's s_T, other new threads from S_p; a stale submit epoch
after a promotion falls back to the thread's current s_T). Duplicates are removed before the fold
by the calls table's primary key. No I/O here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shared.core.program import ProgramLedger, ServiceAggregation
from shared.protocol.ids import DEFAULT_TENANT_ID, MAX_ID_CHARS, all_ids_valid, id_problem

__all__ = ["MAX_ID_CHARS", "Completion", "ProgramRow", "FoldResult", "fold_completions"]
_INT4_MAX = 2**31 - 1  # the integer columns


_INF = math.inf


def _finite_nonnegative(value: float | None) -> bool:
    return value is None or 0 <= value < _INF  # also rejects NaN


@dataclass(slots=True)
class Completion:
    """One completed call as the process table needs it (decoded from the wire elsewhere)."""

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

    def __post_init__(self) -> None:
        # the shared id rules (shared/protocol/ids.py), in one pass: this runs for every completion (20K/s)
        required = (self.call_id, self.program_id, self.thread_id, self.tenant_id)
        optional = tuple(v for v in (self.parent_thread_id, self.engine_id) if v)  # "" reads as absent
        if not all_ids_valid(required + optional):
            names = ("call_id", "program_id", "thread_id", "tenant_id", "parent_thread_id", "engine_id")
            values = (*required, self.parent_thread_id, self.engine_id)
            bad = next((n, id_problem(v)) for n, v in zip(names, values, strict=True)
                       if (v or n in names[:4]) and id_problem(v))
            raise ValueError(f"{bad[0]} {bad[1]}")
        if not (0 <= self.service_s < _INF and 0 <= self.wait_s < _INF):  # also rejects NaN
            raise ValueError(f"call {self.call_id}: service_s and wait_s must be finite and >= 0, "
                             f"got {self.service_s}, {self.wait_s}")
        if not (_finite_nonnegative(self.thread_service_at_submit_s) and _finite_nonnegative(self.completed_at_s)):
            raise ValueError(f"call {self.call_id}: submit base and timestamps must be finite and >= 0")
        epoch = self.submit_epoch or 0
        before = self.completed_calls_before or 0
        if not (0 <= self.prompt_tokens <= _INT4_MAX and 0 <= self.output_tokens <= _INT4_MAX
                and 0 <= self.prefix_hit_tokens <= _INT4_MAX and 0 <= epoch <= _INT4_MAX
                and 0 <= before <= _INT4_MAX):
            raise ValueError(f"call {self.call_id}: token counts, submit_epoch and completed_calls_before "
                             f"must be in [0, {_INT4_MAX}]")


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
