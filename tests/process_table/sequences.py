"""Random completion/promotion sequences and the reference fold through the pure core's ledger."""

from __future__ import annotations

import random
from dataclasses import dataclass

from services.process_table.fold import Completion
from shared.core.program import ROOT_THREAD, ProgramLedger, ServiceAggregation


@dataclass(frozen=True)
class Promotion:
    program_id: str


Step = Completion | Promotion


def random_program_events(rng: random.Random, program_id: str, num_calls: int,
                          max_epoch: int = 2, with_bases: bool = True) -> list[Completion]:
    threads = [ROOT_THREAD]
    parents: dict[str, str | None] = {ROOT_THREAD: None}
    events = []
    for i in range(num_calls):
        if rng.random() < 0.25:  # fork a new thread from an existing one
            tid = f"t{len(threads)}"
            parents[tid] = rng.choice(threads)
            threads.append(tid)
        tid = rng.choice(threads)
        base = round(rng.uniform(0, 5), 3) if with_bases and rng.random() < 0.7 else None
        events.append(Completion(
            call_id=f"{program_id}-c{i}", program_id=program_id, thread_id=tid,
            parent_thread_id=parents[tid], service_s=round(rng.uniform(0, 2), 3),
            wait_s=round(rng.uniform(0, 3), 3), thread_service_at_submit_s=base,
            submit_epoch=rng.randint(0, max_epoch) if rng.random() < 0.5 else None,
            prompt_tokens=rng.randint(0, 4000), output_tokens=rng.randint(1, 500), engine_id="e0",
        ))
    return events


def shuffled_with_duplicates(rng: random.Random, events: list[Completion], dup_fraction: float = 0.3,
                             ) -> list[Completion]:
    stream = list(events) + [rng.choice(events) for _ in range(int(len(events) * dup_fraction))]
    rng.shuffle(stream)
    return stream


def with_promotions(rng: random.Random, stream: list[Completion], program_ids: list[str],
                    num_promotions: int) -> list[Step]:
    steps: list[Step] = list(stream)
    for _ in range(num_promotions):
        steps.insert(rng.randrange(len(steps) + 1), Promotion(rng.choice(program_ids)))
    return steps


def reference_fold(steps: list[Step], aggregation: dict[str, ServiceAggregation]) -> dict[str, ProgramLedger]:
    ledgers = {p: ProgramLedger(program_id=p) for p in aggregation}
    for step in steps:
        ledger = ledgers[step.program_id]
        if isinstance(step, Promotion):
            ledger.promote()
            continue
        if step.call_id in ledger.completed_call_ids:
            continue
        if step.parent_thread_id is not None:
            ledger.fork_thread(step.thread_id, step.parent_thread_id)
        ledger.complete_call(step.call_id, step.thread_id, step.service_s, step.wait_s,
                             step.thread_service_at_submit_s, aggregation[step.program_id], step.submit_epoch)
    return ledgers


def split_batches(rng: random.Random, steps: list[Step], max_batch: int) -> list[list[Completion] | Promotion]:
    """Cut the delivery order into random completion batches; a promotion is its own unit."""
    units: list[list[Completion] | Promotion] = []
    current: list[Completion] = []
    limit = rng.randint(1, max_batch)
    for step in steps:
        if isinstance(step, Promotion):
            if current:
                units.append(current)
                current = []
            units.append(step)
            continue
        current.append(step)
        if len(current) >= limit:
            units.append(current)
            current, limit = [], rng.randint(1, max_batch)
    if current:
        units.append(current)
    return units
