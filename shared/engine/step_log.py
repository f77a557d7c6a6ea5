"""Every engine step's wall time and work, one JSON line each: the real engine profiled as it runs.

    {"end_s": ..., "duration_s": ..., "thread_cpu_s": ..., "tokens": 40, "decode_ctx": 3100,
     "num_decodes": 8, "chunks": [[32, 2080]]}

`duration_s` runs from the start of `schedule()` to the end of `update_from_output()`: the
scheduler's own work and the model run in between, as the cost model's step time counts it (under
vLLM's async scheduling, on GPUs, the next step is scheduled while one runs, so durations overlap).
`chunks` are the prefill chunks as (new tokens, context after them). The same lines come from the
profiler's engine (`loadgen.calibrate.profile_cpu`) and from a live engine (`ENGINE_STEP_LOG`), so
`loadgen.calibrate.fit_cpu` fits either. No vLLM import: the scheduler and its output are read by
their attributes.

A live engine also writes one line per finished call beside it (`calls_path`), on the same
monotonic clock as the steps and the load driver, so a call's time at the client can be split into
the path to the engine, its time in the engine, and the path back:

    {"request_id": ..., "call_id": ..., "thread_id": "main", "prompt_tokens": 412, "output_tokens": 50,
     "added_s": ..., "first_token_s": ..., "finish_s": ..., "wait_s": 0.8, "preemptions": 0}
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, TextIO


def calls_path(step_log: str) -> str:
    """Where a step log's per-call lines go: `x.jsonl` -> `x-calls.jsonl`."""
    p = Path(step_log)
    return str(p.with_name(p.stem + "-calls" + (p.suffix or ".jsonl")))


def scheduled_work(sched: Any, so: Any) -> tuple[int, int, list[tuple[int, int]]]:
    """(tokens, summed decode contexts, prefill chunks as (new, context after)) of a step, read
    right after `schedule()` (which has advanced each request's computed tokens)."""
    decode_ctx = 0
    chunks: list[tuple[int, int]] = []
    for rid, n in so.num_scheduled_tokens.items():
        r = sched.requests[rid]
        after = r.num_computed_tokens
        if n == 1 and after >= r.num_tokens:
            decode_ctx += after
        else:
            chunks.append((n, after))
    return so.total_num_scheduled_tokens, decode_ctx, chunks


class StepLog:
    """Appends a line per step to `path` (line-buffered: a killed engine loses at most one)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: TextIO = open(path, "a", buffering=1)  # noqa: SIM115 (open for the engine's life)
        self._pending: dict[int, tuple[float, float, tuple[int, int, list[tuple[int, int]]]]] = {}
        self._calls: TextIO | None = None  # opened on the first call: the profiler's engine logs steps only
        self._added: dict[str, tuple[float, str | None]] = {}  # request id -> (taken at, the mesh's call id)

    def started(self, so: Any, sched: Any, t0: float, cpu0: float) -> None:
        """`schedule()` began at monotonic `t0` (thread CPU `cpu0`) and returned `so`."""
        self._pending[id(so)] = (t0, cpu0, scheduled_work(sched, so))

    def finished(self, so: Any) -> None:
        """`update_from_output()` for `so` is done: write its line (steps with no tokens are not steps)."""
        begun = self._pending.pop(id(so), None)
        if begun is None:
            return
        t0, cpu0, (tokens, decode_ctx, chunks) = begun
        if not tokens:
            return
        end = time.monotonic()
        self._file.write(json.dumps({
            "end_s": end, "duration_s": end - t0, "thread_cpu_s": time.thread_time() - cpu0, "tokens": tokens,
            "decode_ctx": decode_ctx, "num_decodes": tokens - sum(n for n, _ in chunks), "chunks": chunks}) + "\n")

    def call_added(self, request_id: str, call_id: str | None = None) -> None:
        """The scheduler took the request now (monotonic); `call_id`: the mesh's id for it, if any."""
        self._added[request_id] = (time.monotonic(), call_id)

    def call_finished(self, request_id: str, call: Any | None) -> None:
        """A request left the engine: a call the scheduler tracked (`CallState`: its thread, tokens,
        first token, finish and closed waiting time) gets its line in the calls file; None, only
        forgotten."""
        taken = self._added.pop(request_id, None)
        if taken is None or call is None:
            return
        added, call_id = taken
        if self._calls is None:
            self._calls = open(calls_path(self.path), "a", buffering=1)  # noqa: SIM115 (the engine's life)
        self._calls.write(json.dumps({
            "request_id": request_id, "call_id": call_id, "thread_id": call.thread_id, "prompt_tokens": call.prompt_tokens,
            "output_tokens": call.output_tokens, "added_s": added, "first_token_s": call.first_token_s,
            "finish_s": call.finish_s, "wait_s": call.wait_s, "preemptions": call.preemptions}) + "\n")
