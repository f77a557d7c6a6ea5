"""Runs an `Engine` in real time: each modeled step takes its modeled wall time.

The engine clock is seconds since the stepper started (monotonic). A step planned at `now` with
modeled duration `d` ends at `now + d`: the stepper sleeps until then (times `time_scale`), then
hands the report to the sink, which streams the tokens and publishes completions. While busy,
steps follow each other on the modeled clock (absolute wake-up targets, no drift from sleep
overshoot); after an idle gap the clock resumes at wall time. Calls that
arrive during a step are held and submitted right before the next step, with their true arrival
times, so the engine never sees a submission in the middle of a step it has already planned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from shared.engine.api import Engine, EngineCall, StepReport

StepSink = Callable[[StepReport, float], Awaitable[None]]  # (report, end time on the engine clock)
RejectSink = Callable[[EngineCall, ValueError], None]  # the engine refused a call (e.g. larger than its KV)


class RealTimeStepper:
    def __init__(self, engine: Engine, sink: StepSink, time_scale: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, on_reject: RejectSink | None = None,
                 max_lag_s: float = 0.05) -> None:
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        self.engine = engine
        self._sink = sink
        self._on_reject = on_reject
        self._max_lag_s = max_lag_s  # behind schedule by more than this, the gap counts as idle
        self._time_scale = time_scale
        self._clock = clock
        self._t0 = clock()
        self._pending: list[EngineCall] = []
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._last_end_s = 0.0
        self.last_report: StepReport | None = None
        self.num_steps = 0
        self.busy_s = 0.0  # modeled engine time spent in steps

    def now_s(self) -> float:
        """The engine clock: seconds since start, never before the end of the last step (with
        time_scale < 1 the engine runs ahead of the wall clock)."""
        return max(self._clock() - self._t0, self._last_end_s)

    def submit(self, call: EngineCall) -> None:
        self._pending.append(call)
        self._wakeup.set()

    def is_pending(self, call_id: str) -> bool:
        """Submitted here but not yet handed to the engine (at the next step)."""
        return any(call.call_id == call_id for call in self._pending)

    def abort(self, call_id: str) -> bool:
        for i, call in enumerate(self._pending):
            if call.call_id == call_id:
                del self._pending[i]
                return True
        return self.engine.abort(call_id)

    def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()

    def _flush_pending(self) -> float:
        """Submit the held calls; returns the latest arrival among them (0 if none)."""
        pending, self._pending = self._pending, []
        latest_s = 0.0
        for call in pending:
            latest_s = max(latest_s, call.arrival_s)
            try:
                self.engine.submit(call, call.arrival_s)
            except ValueError as exc:  # this call cannot run here; the others go on
                if self._on_reject is None:
                    raise
                self._on_reject(call, exc)
        return latest_s

    async def run(self) -> None:
        while not self._stopping:
            latest_arrival_s = self._flush_pending()
            if not self.engine.has_work():
                self._wakeup.clear()
                if not self._pending:
                    await self._wakeup.wait()
                continue
            wall_s = self._clock() - self._t0
            if self.num_steps and wall_s - self._last_end_s <= self._max_lag_s:
                # busy: the next step starts where the last one ended, so sleep overshoot (about
                # a millisecond a step) never accumulates into modeled time; a late wake-up is
                # caught up by the next, shorter sleep
                start_s = self._last_end_s
            else:  # idle in between (or far behind): resume on the wall clock
                start_s = max(wall_s, self._last_end_s)
            start_s = max(start_s, latest_arrival_s)  # a step never includes a call before it arrived
            report = self.engine.step(start_s)
            if report is None:  # work exists but nothing can run now (e.g. all blocked): poll
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout=0.005)
                except TimeoutError:
                    pass
                continue
            end_s = start_s + report.duration_s
            delay_s = (end_s - (self._clock() - self._t0)) * self._time_scale
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            else:
                await asyncio.sleep(0)  # let submissions and heartbeats in between steps
            self._last_end_s = end_s
            self.last_report = report
            self.num_steps += 1
            self.busy_s += report.duration_s
            await self._sink(report, end_s)
