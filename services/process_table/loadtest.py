"""End-to-end load test of a running process table: JetStream -> PostgreSQL -> update event.

The driver publishes `CallCompleted` events into the audit stream and listens to the
`ProgramServiceUpdated` events the table publishes after each commit. An update of program p with
`num_completed_calls = k` proves that p's first k completions went through the whole path.

- drain (the headline throughput): with the table stopped, N events are put into the stream; then
  the table starts and works the backlog off. events_per_s = events after the first committed
  batch / (last update - first update), so process start-up is not counted (reported apart).
- live: the driver publishes N events as fast as it can while the table runs; on a 2-core machine
  this is bounded by the driver itself (reported beside the drain rate, not instead of it).
- propagation: publish at a fixed rate; for each event, time from just before its publish to the
  arrival of the first update that covers it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from shared.bus import Bus, Incoming
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.stats import percentile

MAX_PENDING_PUBLISHES = 2000  # async JetStream publishes in flight before the driver waits for acks


@dataclass
class ThroughputResult:
    num_events: int
    num_programs: int
    seconds: float
    events_per_s: float
    publish_events_per_s: float  # how fast the driver got the events into JetStream (acked)


@dataclass
class DrainResult:
    num_events: int
    num_programs: int
    seconds: float  # first update -> last update
    events_per_s: float
    seconds_from_start: float  # process start -> last update (start-up included)
    events_per_s_from_start: float
    prefill_events_per_s: float


@dataclass
class PropagationResult:
    target_rate_per_s: float
    achieved_rate_per_s: float
    num_events: int
    num_programs: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float


class _UpdateWatcher:
    """Receives program-service updates; records when each program reached each call count."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.waiters: dict[str, list[tuple[int, float]]] = {}  # program -> [(k, published_at)]
        self.latencies_s: list[float] = []
        self.last_update_at = 0.0
        self.first_update_at = 0.0
        self.covered_at_first_update = 0
        self.changed = asyncio.Event()

    async def on_update(self, incoming: Incoming) -> None:
        now = time.perf_counter()
        msg: m.ProgramServiceUpdated = incoming.body
        k = msg.num_completed_calls
        if k <= self.count.get(msg.program_id, 0):
            return
        if not self.first_update_at:
            self.first_update_at = now
            self.covered_at_first_update = k
        self.count[msg.program_id] = k
        self.last_update_at = now
        pending = self.waiters.get(msg.program_id)
        while pending and pending[0][0] <= k:
            self.latencies_s.append(now - pending.pop(0)[1])
        self.changed.set()

    async def wait_for(self, expected: dict[str, int], timeout_s: float) -> None:
        deadline = time.perf_counter() + timeout_s
        while any(self.count.get(p, 0) < n for p, n in expected.items()):
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                missing = sum(n - min(n, self.count.get(p, 0)) for p, n in expected.items())
                raise TimeoutError(f"{missing} completions not reflected in updates after {timeout_s:g} s")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))
            except TimeoutError:
                pass


def _event(run_id: str, program: int, seq: int) -> m.CallCompleted:
    # a fork every 4th call of a program so thread bookkeeping is exercised, not only sums
    thread = "main" if seq % 4 else f"t{seq // 4}"
    return m.CallCompleted(
        call_id=f"{run_id}-{program}-{seq}", program_id=f"{run_id}-p{program}", thread_id=thread,
        parent_thread_id=None if thread == "main" else "main", tenant="bench", engine_id="e0",
        service_s=0.01 * (1 + seq % 7), wait_s=0.005 * (seq % 3), prompt_tokens=512, output_tokens=64,
        thread_service_at_submit_s=0.0 if thread != "main" else None, submit_epoch=0,
        completed_at_ns=time.time_ns())


async def _watch(bus: Bus, watcher: _UpdateWatcher):
    sub = await bus.subscribe(subjects.all_program_services(), watcher.on_update, types=(m.ProgramServiceUpdated,))
    await bus.nc.flush()
    return sub


def _events(run_id: str, num_events: int, num_programs: int) -> tuple[list[m.CallCompleted], dict[str, int]]:
    events = [_event(run_id, i % num_programs, i // num_programs) for i in range(num_events)]
    expected: dict[str, int] = {}
    for e in events:
        expected[e.program_id] = expected.get(e.program_id, 0) + 1
    return events, expected


async def _publish_all(bus: Bus, events: list[m.CallCompleted]) -> None:
    pending: list[asyncio.Future] = []
    for e in events:
        pending.append(await bus.publish_event_nowait(e))
        if len(pending) >= MAX_PENDING_PUBLISHES:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)


async def run_drain(bus: Bus, num_events: int, num_programs: int, stop_table: Callable[[], Awaitable[None]],
                    start_table: Callable[[], Awaitable[None]], timeout_s: float = 600.0) -> DrainResult:
    run_id = f"dr{uuid.uuid4().hex[:8]}"
    events, expected = _events(run_id, num_events, num_programs)
    await stop_table()
    t0 = time.perf_counter()
    await _publish_all(bus, events)
    prefill_s = time.perf_counter() - t0
    watcher = _UpdateWatcher()
    sub = await _watch(bus, watcher)
    started = time.perf_counter()
    await start_table()
    try:
        await watcher.wait_for(expected, timeout_s)
    finally:
        await sub.unsubscribe()
    seconds = watcher.last_update_at - watcher.first_update_at
    from_start = watcher.last_update_at - started
    return DrainResult(
        num_events=num_events, num_programs=num_programs, seconds=round(seconds, 3),
        events_per_s=round((num_events - watcher.covered_at_first_update) / seconds, 1),
        seconds_from_start=round(from_start, 3), events_per_s_from_start=round(num_events / from_start, 1),
        prefill_events_per_s=round(num_events / prefill_s, 1))


async def run_throughput(bus: Bus, num_events: int, num_programs: int, timeout_s: float = 300.0) -> ThroughputResult:
    run_id = f"tp{uuid.uuid4().hex[:8]}"
    watcher = _UpdateWatcher()
    sub = await _watch(bus, watcher)
    events, expected = _events(run_id, num_events, num_programs)
    started = time.perf_counter()
    await _publish_all(bus, events)
    published = time.perf_counter()
    try:
        await watcher.wait_for(expected, timeout_s)
    finally:
        await sub.unsubscribe()
    seconds = watcher.last_update_at - started
    return ThroughputResult(num_events=num_events, num_programs=num_programs, seconds=round(seconds, 3),
                            events_per_s=round(num_events / seconds, 1),
                            publish_events_per_s=round(num_events / (published - started), 1))


async def run_propagation(bus: Bus, rate_per_s: float, duration_s: float, num_programs: int,
                          timeout_s: float = 60.0) -> PropagationResult:
    run_id = f"pr{uuid.uuid4().hex[:8]}"
    watcher = _UpdateWatcher()
    sub = await _watch(bus, watcher)
    num_events = int(rate_per_s * duration_s)
    sent: dict[str, int] = {}
    acks: list[asyncio.Future] = []
    started = time.perf_counter()
    for i in range(num_events):
        due = started + i / rate_per_s
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        e = _event(run_id, i % num_programs, i // num_programs)
        k = sent[e.program_id] = sent.get(e.program_id, 0) + 1
        watcher.waiters.setdefault(e.program_id, []).append((k, time.perf_counter()))
        acks.append(await bus.publish_event_nowait(e))
    elapsed = time.perf_counter() - started
    await asyncio.gather(*acks)
    try:
        await watcher.wait_for(sent, timeout_s)
    finally:
        await sub.unsubscribe()
    lat_ms = sorted(x * 1e3 for x in watcher.latencies_s)
    return PropagationResult(
        target_rate_per_s=rate_per_s, achieved_rate_per_s=round(num_events / elapsed, 1), num_events=len(lat_ms),
        num_programs=num_programs, p50_ms=round(percentile(lat_ms, 50), 3),
        p90_ms=round(percentile(lat_ms, 90), 3), p99_ms=round(percentile(lat_ms, 99), 3), max_ms=round(lat_ms[-1], 3),
        mean_ms=round(sum(lat_ms) / len(lat_ms), 3))


def as_dict(result: DrainResult | ThroughputResult | PropagationResult) -> dict:
    return asdict(result)
