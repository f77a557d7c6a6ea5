"""A tiny driver for the emulated engine: submit calls at given times, step on a virtual clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.program import ServiceAggregation
from shared.core.starvation import StarvationConfig
from shared.engine.api import CallCompletion, DictProgramDirectory, EngineCall, StepReport
from shared.engine.vllm_emulated import EmulatedVllmEngine


def engine(policy: str, directory: DictProgramDirectory, *, baseline: str | None = None, max_num_seqs: int = 4,
           num_kv_blocks: int = 4000, beta: float | None = None, **kw) -> EmulatedVllmEngine:
    return EmulatedVllmEngine("e0", SchedulingPolicy(PolicyName(policy)), directory, baseline=baseline,
                              max_num_seqs=max_num_seqs, num_kv_blocks=num_kv_blocks, max_model_len=16384,
                              starvation=StarvationConfig(beta=beta), **kw)


def call(call_id: str, program_id: str, segments: tuple, out: int, t: float, seq: int) -> EngineCall:
    return EngineCall(call_id, program_id, "main", segments, out, t, t, seq)


@dataclass
class Run:
    done: dict[str, CallCompletion] = field(default_factory=dict)
    reports: list[StepReport] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    end_s: float = 0.0


def run(eng: EmulatedVllmEngine, arrivals: list[tuple[float, EngineCall]], directory: DictProgramDirectory,
        on_step: Callable[[float, StepReport], None] | None = None, max_steps: int = 100_000,
        fold: bool = True) -> Run:
    """Drive to completion; completed calls are folded into their program ledgers (the simulator's job)."""
    res = Run()
    pending = sorted(arrivals, key=lambda a: a[0])
    now = 0.0
    for _ in range(max_steps):
        while pending and pending[0][0] <= now:
            eng.submit(pending.pop(0)[1], now)
        report = eng.step(now)
        if report is None:
            if not pending:
                break
            now = pending[0][0]
            continue
        now += report.duration_s
        res.reports.append(report)
        for c in report.finished:
            res.done[c.call_id] = c
            res.order.append(c.call_id)
            if fold:
                directory.ledger(c.program_id).complete_call(
                    c.call_id, c.thread_id, c.service_s, c.wait_s, c.thread_service_at_submit_s,
                    ServiceAggregation.SUM, c.submit_epoch)
        if on_step is not None:
            on_step(now, report)
    res.end_s = now
    return res
