"""The chaos workload: closed-loop client programs over the HTTP API, each a session of sequential
calls, retried on retryable errors like a well-behaved OpenAI client would. Every HTTP attempt is
tallied by outcome, and the call ids the clients saw completed are kept for the ledger audit.

Outcomes of one attempt:
- completed: a full answer (non-streaming body, or a stream that ended with [DONE]);
- failed_retryable: 429/503 (or that error inside a stream), or the connection dropped before any
  answer; the program retries the call;
- failed_other: any other error status (a 5xx other than 503 would be a bug);
- no_answer: nothing came back within the attempt's deadline (counted as lost).

Every `fork_every`-th program forks: its first call runs on thread "main", the middle calls on
two threads forked from main (X-Thread-Id / X-Parent-Thread-Id, as an agent exploring two branches),
both in flight at once, and its last call on main again; the audit recomputes their ATLAS
thread services and critical path from the call rows.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import httpx

RETRYABLE_STATUSES = {429, 503}
MAX_ATTEMPTS_PER_CALL = 12


@dataclass
class Tally:
    submitted: int = 0
    completed: int = 0
    failed_retryable: int = 0
    failed_other: int = 0
    no_answer: int = 0
    programs_started: int = 0
    programs_completed: int = 0
    calls_given_up: int = 0  # a call that failed MAX_ATTEMPTS_PER_CALL times in a row
    completed_call_ids: dict[str, str] = field(default_factory=dict)  # call id -> session id
    sessions: set[str] = field(default_factory=set)
    forked_sessions: set[str] = field(default_factory=set)  # programs that forked threads
    errors: dict[str, int] = field(default_factory=dict)  # code -> count, for the report

    def note_error(self, code: str) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1


@dataclass
class WorkloadSpec:
    concurrency: int = 8  # programs in flight
    calls_per_program: int = 4
    max_tokens: int = 24
    prompt_chars: int = 400
    stream_every: int = 3  # every n-th call streams (the others wait for the whole answer)
    attempt_timeout_s: float = 30.0
    fork_every: int = 3  # every n-th program forks two threads (0: none fork)


class _Outcome(Exception):
    def __init__(self, kind: str, code: str) -> None:
        super().__init__(f"{kind}: {code}")
        self.kind = kind
        self.code = code


async def _open_session(http: httpx.AsyncClient, headers: dict, tally: Tally, stop_at: float) -> str | None:
    while time.monotonic() < stop_at:
        try:
            resp = await http.post("/v1/sessions", json={"workload_class": "chaos"}, headers=headers)
        except httpx.HTTPError:
            await asyncio.sleep(0.3)
            continue
        if resp.status_code == 201:
            return resp.json()["id"]
        tally.note_error(f"open:{resp.status_code}")
        await asyncio.sleep(0.3)
    return None


def _error_code(body: dict) -> str:
    err = body.get("error") or {}
    return str(err.get("code") or err.get("type") or "unknown")


async def _attempt(http: httpx.AsyncClient, headers: dict, payload: dict, timeout_s: float) -> str:
    """One HTTP attempt; returns the completed call id or raises `_Outcome`."""
    try:
        async with asyncio.timeout(timeout_s):
            if not payload.get("stream"):
                resp = await http.post("/v1/chat/completions", json=payload, headers=headers)
                if resp.status_code == 200:
                    return resp.json()["id"].removeprefix("chatcmpl-")
                kind = "failed_retryable" if resp.status_code in RETRYABLE_STATUSES else "failed_other"
                raise _Outcome(kind, f"{resp.status_code}:{_error_code(resp.json())}")
            async with http.stream("POST", "/v1/chat/completions", json=payload, headers=headers) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    kind = "failed_retryable" if resp.status_code in RETRYABLE_STATUSES else "failed_other"
                    raise _Outcome(kind, f"{resp.status_code}:{_error_code(resp.json())}")
                call_id = ""
                async for line in resp.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line[6:]
                    if data == "[DONE]":
                        return call_id
                    frame = json.loads(data)
                    if "error" in frame:
                        kind = "failed_retryable" if frame["error"].get("type") == "server_error" else "failed_other"
                        raise _Outcome(kind, f"stream:{_error_code(frame)}")
                    call_id = frame["id"].removeprefix("chatcmpl-")
                raise _Outcome("failed_retryable", "stream:ended_without_done")
    except TimeoutError:
        raise _Outcome("no_answer", "timeout") from None
    except httpx.HTTPError as exc:  # the API itself went away mid-call
        raise _Outcome("failed_retryable", f"http:{type(exc).__name__}") from None


def _phases(spec: WorkloadSpec, index: int) -> list[list[tuple[str, str | None]]]:
    """The program's calls as phases of (thread, parent) run concurrently, in order."""
    n = spec.calls_per_program
    if spec.fork_every <= 0 or index % spec.fork_every or n < 3:
        return [[("main", None)] for _ in range(n)]
    middle = [(f"branch{k % 2}", "main") for k in range(n - 2)]
    return [[("main", None)], *(middle[k:k + 2] for k in range(0, len(middle), 2)), [("main", None)]]


async def _call(http: httpx.AsyncClient, headers: dict, payload: dict, spec: WorkloadSpec, tally: Tally,
                session_id: str) -> bool:
    """One call, retried on retryable outcomes; False when given up."""
    for attempt in range(MAX_ATTEMPTS_PER_CALL):
        tally.submitted += 1
        try:
            call_id = await _attempt(http, headers, payload, spec.attempt_timeout_s)
        except _Outcome as out:
            setattr(tally, out.kind, getattr(tally, out.kind) + 1)
            tally.note_error(out.code)
            await asyncio.sleep(min(0.2 * 2 ** attempt, 2.0))
            continue
        tally.completed += 1
        tally.completed_call_ids[call_id] = session_id
        return True
    tally.calls_given_up += 1
    return False


async def _program(http: httpx.AsyncClient, key: str, spec: WorkloadSpec, tally: Tally, stop_at: float,
                   index: int) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    session_id = await _open_session(http, headers, tally, stop_at)
    if session_id is None:
        return
    tally.programs_started += 1
    tally.sessions.add(session_id)
    phases = _phases(spec, index)
    if len(phases) < spec.calls_per_program:
        tally.forked_sessions.add(session_id)
    history = [{"role": "system", "content": "x" * spec.prompt_chars}]
    n = 0
    for phase in phases:
        calls = []
        for thread, parent in phase:
            messages = [*history, {"role": "user", "content": f"step {n} of program {index} on {thread}"}]
            thread_headers = {**headers, "X-Thread-Id": thread}
            if parent is not None:
                thread_headers["X-Parent-Thread-Id"] = parent
            payload = {"model": "autellix-lite", "messages": messages, "max_tokens": spec.max_tokens,
                       "session_id": session_id, "stream": (index + n) % spec.stream_every == 0}
            calls.append(_call(http, thread_headers, payload, spec, tally, session_id))
            n += 1
        if not all(await asyncio.gather(*calls)):
            return
        history += [{"role": "user", "content": f"step {n - 1}"}, {"role": "assistant", "content": "ok"}]
    tally.programs_completed += 1


async def run_workload(api_url: str, keys: list[str], spec: WorkloadSpec, duration_s: float,
                       tally: Tally | None = None) -> Tally:
    """Keep `spec.concurrency` programs running until `duration_s` has passed; programs started by
    then run to their end (each call still bounded by its attempts)."""
    tally = tally or Tally()
    stop_at = time.monotonic() + duration_s
    limits = httpx.Limits(max_connections=spec.concurrency * 2 + 8)
    async with httpx.AsyncClient(base_url=api_url, timeout=httpx.Timeout(spec.attempt_timeout_s),
                                 limits=limits) as http:
        counter = 0

        async def lane(lane_index: int) -> None:
            nonlocal counter
            while time.monotonic() < stop_at:
                counter += 1
                await _program(http, keys[counter % len(keys)], spec, tally, stop_at + 60.0, counter)

        await asyncio.gather(*(lane(i) for i in range(spec.concurrency)))
    return tally
