"""The client load of the multi-host run: the chaos workload's closed-loop programs (sessions of
sequential calls over the HTTP API, retried like a well-behaved OpenAI client, tallied for the
ledger audit), with each logical call's start and end kept so that recovery from a fault can be
measured per call."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from loadgen.chaos import workload
from loadgen.chaos.workload import Tally, WorkloadSpec


@dataclass(frozen=True)
class CallTiming:
    start: float  # monotonic, when the client first sent it
    end: float  # when it completed (or was given up)
    completed: bool
    # every HTTP attempt: (sent, answered, outcome: "ok" or the error code); the gaps between them
    # are the client's back-off. Where a hit call's recovery time went, attempt by attempt.
    attempts: tuple[tuple[float, float, str], ...] = ()


async def _call(http: httpx.AsyncClient, headers: dict, payload: dict, spec: WorkloadSpec, tally: Tally,
                session_id: str, attempts: list) -> bool:
    """`workload._call` (same retries and back-off), with each attempt's times and outcome kept."""
    for attempt in range(workload.MAX_ATTEMPTS_PER_CALL):
        tally.submitted += 1
        sent = time.monotonic()
        try:
            call_id = await workload._attempt(http, headers, payload, spec.attempt_timeout_s)
        except workload._Outcome as out:
            attempts.append((sent, time.monotonic(), out.code))
            setattr(tally, out.kind, getattr(tally, out.kind) + 1)
            tally.note_error(out.code)
            await asyncio.sleep(min(0.2 * 2 ** attempt, 2.0))
            continue
        attempts.append((sent, time.monotonic(), "ok"))
        tally.completed += 1
        tally.completed_call_ids[call_id] = session_id
        return True
    tally.calls_given_up += 1
    return False


async def _program(http: httpx.AsyncClient, key: str, spec: WorkloadSpec, tally: Tally, index: int,
                   stop_at: float, timings: list[CallTiming]) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    session_id = await workload._open_session(http, headers, tally, stop_at + 60.0)
    if session_id is None:
        return
    tally.programs_started += 1
    tally.sessions.add(session_id)
    history = [{"role": "system", "content": "x" * spec.prompt_chars}]
    for n in range(spec.calls_per_program):
        payload = {"model": "autellix-lite", "max_tokens": spec.max_tokens, "session_id": session_id,
                   "messages": [*history, {"role": "user", "content": f"step {n} of program {index}"}],
                   "stream": (index + n) % spec.stream_every == 0}
        start, attempts = time.monotonic(), []
        ok = await _call(http, headers, payload, spec, tally, session_id, attempts)
        timings.append(CallTiming(start, time.monotonic(), ok, tuple(attempts)))
        if not ok:
            return
        history += [{"role": "user", "content": f"step {n}"}, {"role": "assistant", "content": "ok"}]
    tally.programs_completed += 1


async def run_load(api_url: str, keys: list[str], spec: WorkloadSpec, done: asyncio.Event,
                   tally: Tally, timings: list[CallTiming]) -> None:
    """`spec.concurrency` lanes of programs until `done` is set; programs in flight run to their end."""
    limits = httpx.Limits(max_connections=spec.concurrency * 2 + 8)
    async with httpx.AsyncClient(base_url=api_url, timeout=httpx.Timeout(spec.attempt_timeout_s),
                                 limits=limits) as http:
        counter = 0

        async def lane() -> None:
            nonlocal counter
            while not done.is_set():
                counter += 1
                await _program(http, keys[counter % len(keys)], spec, tally, counter, time.monotonic(), timings)

        await asyncio.gather(*(lane() for _ in range(spec.concurrency)))
