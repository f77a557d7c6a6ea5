"""A minimal driver for engine tests: program chains on a virtual clock (the simulator's job, in
miniature). Each program is a list of calls; a call is submitted when its predecessor finishes,
with the history (earlier prompts and outputs) as its prompt prefix."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from shared.core.program import ServiceAggregation
from shared.engine.api import CallCompletion, DictProgramDirectory, EngineCall, StepReport, output_segment_id
from shared.engine.lite import LiteEngine


@dataclass
class Chain:
    program_id: str
    arrival_s: float
    calls: list[tuple[int, int]]  # (new prompt tokens, output tokens) per call
    system_tokens: int = 0


@dataclass
class Result:
    completions: dict[str, CallCompletion] = field(default_factory=dict)
    program_finish_s: dict[str, float] = field(default_factory=dict)
    reports: list[StepReport] = field(default_factory=list)
    end_s: float = 0.0


def drive(engine: LiteEngine, directory: DictProgramDirectory, chains: list[Chain],
          aggregation: ServiceAggregation = ServiceAggregation.SUM, max_steps: int = 200_000,
          check=None) -> Result:
    res = Result()
    seq = 0
    pending: list[tuple[float, str, Chain, int, tuple]] = [(c.arrival_s, c.program_id, c, 0, ()) for c in chains]
    heapq.heapify(pending)
    now = 0.0

    def submit(chain: Chain, index: int, history: tuple, t: float) -> tuple:
        nonlocal seq
        new, out = chain.calls[index]
        prefix = history
        if not history and chain.system_tokens:
            prefix = ((f"{chain.program_id}/sys", chain.system_tokens),)
        segs = prefix + ((f"{chain.program_id}/in{index}", new),)
        call = EngineCall(f"{chain.program_id}/c{index}", chain.program_id, "main", segs, out, t,
                          chain.arrival_s, seq)
        seq += 1
        engine.submit(call, t)
        return segs + ((output_segment_id(call.call_id), out),)

    inflight: dict[str, tuple[Chain, int, tuple]] = {}
    for _ in range(max_steps):
        while pending and pending[0][0] <= now:
            t, _, chain, index, history = heapq.heappop(pending)
            cid = f"{chain.program_id}/c{index}"
            inflight[cid] = (chain, index, submit(chain, index, history, max(t, now)))
        if not engine.has_work():
            if not pending:
                break
            now = pending[0][0]
            continue
        report = engine.step(now)
        res.reports.append(report)
        if check is not None:
            check(engine, report)
        now += report.duration_s
        for done in report.finished:
            res.completions[done.call_id] = done
            directory.ledger(done.program_id).complete_call(
                done.call_id, done.thread_id, done.service_s, done.wait_s, done.thread_service_at_submit_s,
                aggregation, done.submit_epoch)
            chain, index, history = inflight.pop(done.call_id)
            if index + 1 < len(chain.calls):
                heapq.heappush(pending, (now, chain.program_id, chain, index + 1, history))
            else:
                res.program_finish_s[chain.program_id] = now
    else:
        raise AssertionError("engine did not drain within max_steps")
    res.end_s = now
    return res
