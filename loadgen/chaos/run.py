"""One chaos run: start the stack, run the workload, inject faults round-robin, audit, report."""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from loadgen.chaos.faults import FAULT_KINDS, FaultRecord, inject
from loadgen.chaos.ledger import audit
from loadgen.chaos.stack import ChaosStack
from loadgen.chaos.workload import Tally, WorkloadSpec, run_workload

AGGREGATION_POLICY = {"sum": "plas", "critical_path": "atlas"}  # the scheduling policy of each


@dataclass
class ChaosPlan:
    kinds: tuple[str, ...] = FAULT_KINDS
    faults_per_kind: int = 2
    gap_s: float = 3.0  # load between two faults (also before the first)
    down_s: float = 0.5  # how long a killed service or server stays down
    tail_s: float = 4.0  # load after the last fault
    max_duration_s: float = 600.0  # hard bound on the fault phase
    engines: int = 2
    workload: WorkloadSpec = None  # type: ignore[assignment]
    # "sum": PLAS sessions (S_p == sum of the call rows); "critical_path": ATLAS sessions (S_p is the
    # longest thread, audited by replaying the pure core over the rows)
    aggregation: str = "sum"

    def __post_init__(self) -> None:
        if self.workload is None:
            self.workload = WorkloadSpec()
        if self.faults_per_kind < 0 or self.faults_per_kind > 500:
            raise ValueError("faults per kind must be in 0..500")
        if not 0 < self.max_duration_s <= 6 * 3600:
            raise ValueError("the run is bounded: max duration must be in (0, 6 h]")
        if self.aggregation not in AGGREGATION_POLICY:
            raise ValueError(f"aggregation must be one of {sorted(AGGREGATION_POLICY)}")


async def run_faults(stack: ChaosStack, plan: ChaosPlan, t0: float, done: asyncio.Event) -> list[FaultRecord]:
    records: list[FaultRecord] = []
    schedule = [k for i in range(plan.faults_per_kind) for k in plan.kinds]
    counts = dict.fromkeys(plan.kinds, 0)
    try:
        for kind in schedule:
            await asyncio.sleep(plan.gap_s)
            if time.monotonic() - t0 > plan.max_duration_s:
                break
            try:
                records.append(await inject(stack, kind, counts[kind], plan.down_s, t0))
            except TimeoutError as exc:  # the stack did not come back: report it, stop injecting
                records.append(FaultRecord(kind, f"UNRECOVERED: {exc}", round(time.monotonic() - t0, 2), -1.0))
                break
            finally:
                counts[kind] += 1
        await asyncio.sleep(plan.tail_s)
    finally:
        done.set()
    return records


async def chaos(plan: ChaosPlan, stack: ChaosStack | None = None, progress=None) -> dict:
    """Run the plan (on `stack` if given, else a fresh one that is stopped afterwards)."""
    own = stack is None
    stack = stack or await ChaosStack(engines=plan.engines, extra_env={
        "DEFAULT_AGGREGATION": plan.aggregation, "SCHEDULING_POLICY": AGGREGATION_POLICY[plan.aggregation]}).up()
    say = progress or (lambda _: None)
    try:
        t0 = time.monotonic()
        rss_start = stack.rss_mib()
        tally = Tally()
        done = asyncio.Event()
        keys = list(stack.tenant_keys.values())
        say(f"stack up at {stack.api_url}; {len(plan.kinds) * plan.faults_per_kind} faults planned")
        faults_task = asyncio.create_task(run_faults(stack, plan, t0, done))
        load_task = asyncio.create_task(_load_until(stack.api_url, keys, plan.workload, tally, done))
        records = await faults_task
        await load_task
        say(f"load done: {tally.completed}/{tally.submitted} calls completed; auditing PostgreSQL")
        result = await audit(stack.database_url, tally.completed_call_ids, tally.sessions,
                             forked=tally.forked_sessions)
        rss_end = stack.rss_mib()
        held = held_back(stack.log_lines("process_table", "completions_held_back"))
        unrecovered = [r for r in records if r.recovered_s < 0]
        if unrecovered:
            kept = stack.keep_logs(Path(tempfile.mkdtemp(prefix="autellix-chaos-logs-", dir="/tmp")))
            say(f"a fault was not recovered from; logs kept in {kept}")
    finally:
        if own:
            stack.down()
    injected = {k: sum(1 for r in records if r.kind == k) for k in plan.kinds}
    unrecovered = [asdict(r) for r in records if r.recovered_s < 0]
    lost = tally.no_answer + result.lost_completions + tally.calls_given_up
    return {
        "submitted": tally.submitted,
        "completed": tally.completed,
        "failed_retryable": tally.failed_retryable,
        "failed_other": tally.failed_other,
        "lost": lost,
        "lost_detail": {"no_answer": tally.no_answer, "completion_missing_in_db": result.lost_completions,
                        "calls_given_up": tally.calls_given_up},
        "double_counted": result.double_counted,
        "atlas_mismatches": result.atlas.mismatches,
        "atlas": result.atlas.report(),
        "orphan_completions": result.orphan_completions,
        # arrived ahead of one their client had seen, held back until it was in (client_order.py)
        "completions_held": held,
        "faults_injected": injected,
        "unrecovered_faults": unrecovered,
        "faults": [asdict(r) for r in records],
        "programs": {"started": tally.programs_started, "completed": tally.programs_completed,
                     "forked": len(tally.forked_sessions),
                     "checked_in_db": result.programs_checked, "promoted": result.promoted_programs},
        "calls_in_db": result.calls_in_table,
        "errors_seen": dict(sorted(tally.errors.items())),
        "mismatches": result.mismatches[:20],
        "settle_s": result.settle_s,
        "duration_s": round(time.monotonic() - t0, 1),
        "rss_mib": {"start": rss_start, "end": rss_end},
        "plan": {"kinds": list(plan.kinds), "faults_per_kind": plan.faults_per_kind, "gap_s": plan.gap_s,
                 "down_s": plan.down_s, "engines": plan.engines, "aggregation": plan.aggregation,
                 "workload": asdict(plan.workload)},
    }


def held_back(lines: list[str]) -> dict:
    """The process table's `completions_held_back` log lines summed: completions held, and those
    folded out of order after waiting their longest."""
    held = sum(int(m.group(1)) for line in lines if (m := re.search(r"\bnum\W+(\d+)", line)))
    overdue = sum(len(re.findall(r"['\"][^'\"]+['\"]", m.group(1))) for line in lines
                  if (m := re.search(r"folded_out_of_order\W+\[([^\]]*)\]", line)))
    return {"held": held, "folded_out_of_order": overdue, "hold_events": len(lines)}


async def _load_until(api_url: str, keys: list[str], spec: WorkloadSpec, tally: Tally, done: asyncio.Event) -> None:
    """Run programs in rounds until the fault phase is over (programs in flight finish)."""
    while not done.is_set():
        await run_workload(api_url, keys, spec, duration_s=2.0, tally=tally)
