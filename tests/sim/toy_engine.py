"""A tiny deterministic engine for testing the simulator's event loop only (a test double).

Every step takes `step_s`, runs up to `max_batch` calls chosen by the policy's priority key and
emits one token per running call. Real runs and the scenario tests use the `lite` engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.core.policy import CallView, SchedulingPolicy
from shared.engine.api import CallCompletion, DictProgramDirectory, EngineCall, StepReport


@dataclass
class _Live:
    call: EngineCall
    emitted: int = 0
    service_s: float = 0.0
    wait_s: float = 0.0
    last_s: float = 0.0
    running: bool = False


@dataclass
class ToyEngine:
    engine_id: str
    policy: SchedulingPolicy
    directory: DictProgramDirectory
    max_batch: int = 2
    step_s: float = 0.01
    live: dict[str, _Live] = field(default_factory=dict)

    def submit(self, call: EngineCall, now_s: float) -> None:
        self.live[call.call_id] = _Live(call, last_s=now_s)

    def _key(self, x: _Live) -> tuple:
        led = self.directory.ledger(x.call.program_id)
        view = CallView(x.call.arrival_s, x.call.seq, x.service_s, led.service_s,
                        led.thread_service(x.call.thread_id), x.call.program_arrival_s,
                        x.call.oracle_remaining_s)
        return self.policy.key(view)

    def step(self, now_s: float) -> StepReport | None:
        if not self.live:
            return None
        order = sorted(self.live.values(), key=self._key)
        if not self.policy.preemptive:  # FCFS keeps its runners
            order = [x for x in order if x.running] + [x for x in order if not x.running]
        batch = order[: self.max_batch]
        for x in self.live.values():
            x.running = False
            x.wait_s += now_s - x.last_s
            x.last_s = now_s + self.step_s
        finished = []
        for x in batch:
            x.running = True
            x.emitted += 1
            x.service_s += self.step_s
            if x.emitted == x.call.max_output_tokens:
                del self.live[x.call.call_id]
                finished.append(CallCompletion(
                    x.call.call_id, x.call.program_id, x.call.thread_id, x.service_s, x.wait_s, 0,
                    x.call.prompt_tokens, x.emitted, 0, 0, now_s, now_s + self.step_s, 0.0, 0))
        for x in order[self.max_batch:]:
            x.wait_s += self.step_s
        return StepReport(self.step_s, len(batch), len(batch), len(order) - len(batch),
                          0, 1, {x.call.call_id: 1 for x in batch}, finished)

    def abort(self, call_id: str) -> bool:
        return self.live.pop(call_id, None) is not None

    def has_work(self) -> bool:
        return bool(self.live)

    def load(self) -> float:
        return float(sum(x.call.max_output_tokens - x.emitted for x in self.live.values()))

    def primary_hit_tokens(self, prompt_segments) -> int:
        return 0
