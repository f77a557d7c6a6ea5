"""Runs programs against a live Autellix API: one session per program, each call submitted when its
dependencies have finished and its tool pause has passed, forks as parallel requests.

Each program names its session with an id of its own (`X-Session-Id`): the API opens it on the
first call; the driver closes it with `DELETE /v1/sessions/{id}` once every call is over.

Times are seconds since the run started (`time.perf_counter`), so records compare with the
simulator's: normalized latency = (finish of the last call - arrival) / generated tokens.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import openai

from loadgen.live.prompts import call_messages
from loadgen.sim.kv_simulation import call_facts
from loadgen.workloads.spec import ProgramSpec

KV_BLOCK_TOKENS = 16  # the engines' block size: the reusable prefix is counted in whole blocks


@dataclass
class LiveProgramRecord:
    program_id: str
    workload: str
    arrival_s: float  # scheduled arrival (relative to the run start)
    started_s: float  # when the program started (its session opens with its first call)
    finish_s: float | None = None
    output_tokens: int = 0  # tokens actually received
    num_calls: int = 0
    failed_calls: int = 0
    error: str | None = None
    session_id: str | None = None
    # KV reuse as the client sees it (issue 6): prompt tokens sent, the API's cached_tokens, and the
    # prompt prefix the session had computed in its parent call (whole blocks, as `autellix sim`)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    reusable_tokens: int = 0
    missed_reusable_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.finish_s is not None and self.error is None

    @property
    def response_s(self) -> float:
        return (self.finish_s or self.arrival_s) - self.arrival_s

    @property
    def normalized_latency_s(self) -> float:
        return self.response_s / max(self.output_tokens, 1)


@dataclass
class LiveProgress:
    arrived: int = 0
    finished: int = 0
    failed: int = 0
    calls_in_flight: int = 0
    calls_done: int = 0
    tokens: int = 0
    errors: list[str] = field(default_factory=list)


class LiveDriver:
    def __init__(self, base_url: str, api_key: str, model: str = "autellix-lite", timeout_s: float = 600.0,
                 max_retries: int = 2, tool_hints: bool = False, extra_body: dict | None = None,
                 messages_for=call_messages, size_hints: bool = False) -> None:
        self.tool_hints = tool_hints  # send X-Next-Tool: the tool the program runs after each call
        # send X-Remaining-Calls: the program's calls not finished yet, this one included (the
        # simulator's exact-plan client, loadgen/sim/size_hints.py)
        self.size_hints = size_hints
        self.messages_for = messages_for  # (call, outputs) -> the chat messages of the call
        # more request fields, e.g. {"ignore_eos": True} so a real model's calls run their full length
        self.extra_body = extra_body
        root = base_url.rstrip("/").removesuffix("/v1")
        self.client = openai.AsyncOpenAI(base_url=f"{root}/v1", api_key=api_key, timeout=timeout_s,
                                         max_retries=max_retries)
        self.http = httpx.AsyncClient(base_url=root, headers={"Authorization": f"Bearer {api_key}"},
                                      timeout=timeout_s)
        self.model = model
        self.progress = LiveProgress()
        self._t0 = time.perf_counter()
        # each finished call's times at the client on the system's monotonic clock (an engine's
        # calls log, shared.engine.step_log, uses the same one): sent, first token, end; and the
        # wall clock at sending, which places wall-clock marks (loadgen/live/hop_marks) on it
        self.call_times: list[dict] = []

    def now_s(self) -> float:
        return time.perf_counter() - self._t0

    async def close(self) -> None:
        await self.client.close()
        await self.http.aclose()

    async def run(self, programs: list[ProgramSpec], on_tick: Callable[[LiveProgress, float], None] | None = None,
                  drain_timeout_s: float | None = None) -> list[LiveProgramRecord]:
        """Start each program at its `arrival_s`; return when all finished (or the drain timed out:
        unfinished programs then have no `finish_s`)."""
        self._t0 = time.perf_counter()
        records = [LiveProgramRecord(p.program_id, p.workload, p.arrival_s, p.arrival_s) for p in programs]
        tasks = [asyncio.create_task(self._program_at(p, r)) for p, r in zip(programs, records, strict=True)]
        ticker = asyncio.create_task(self._tick(on_tick)) if on_tick else None
        last_arrival_s = max((p.arrival_s for p in programs), default=0.0)
        timeout = None if drain_timeout_s is None else last_arrival_s + drain_timeout_s
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=10)
        if ticker:
            ticker.cancel()
            on_tick(self.progress, self.now_s())
        for r in records:
            if r.finish_s is None and r.error is None:
                r.error = "unfinished at the end of the drain period"
        return records

    async def _tick(self, on_tick: Callable[[LiveProgress, float], None]) -> None:
        while True:
            await asyncio.sleep(1.0)
            on_tick(self.progress, self.now_s())

    async def _program_at(self, spec: ProgramSpec, rec: LiveProgramRecord) -> None:
        delay = spec.arrival_s - self.now_s()
        if delay > 0:
            await asyncio.sleep(delay)
        self.progress.arrived += 1
        rec.started_s = self.now_s()
        try:
            await self._program(spec, rec)
        except Exception as exc:  # one failed program is a data point, not the end of the run
            rec.error = f"{type(exc).__name__}: {exc}"
            self.progress.failed += 1
            if len(self.progress.errors) < 20:
                self.progress.errors.append(f"{spec.program_id}: {rec.error}")
            return
        self.progress.finished += 1

    async def _program(self, spec: ProgramSpec, rec: LiveProgramRecord) -> None:
        # a client-chosen id (unique per run): the API opens the session on the program's first call
        tag = "".join(c if "!" <= c <= "~" else "_" for c in spec.program_id[:80])  # visible ASCII only
        rec.session_id = f"{tag}-{uuid.uuid4().hex[:16]}"
        outputs: dict[str, str] = {}
        done = {c.call_id: asyncio.Event() for c in spec.calls}
        finish_s = [rec.started_s]
        finished_calls = [0]
        facts = call_facts([spec], KV_BLOCK_TOKENS)

        async def one_call(call) -> None:
            for dep in call.depends_on:
                await done[dep].wait()
            if call.delay_s > 0:
                await asyncio.sleep(call.delay_s)
            fact = facts[call.call_id]
            text, tokens, cached = await self._call(rec.session_id, call, outputs,
                                                    fact.hint.next_tool if self.tool_hints else None,
                                                    len(spec.calls) - finished_calls[0] if self.size_hints else None)
            finished_calls[0] += 1
            outputs[call.call_id] = text
            rec.output_tokens += tokens
            rec.prompt_tokens += call.prompt_tokens
            rec.cached_tokens += cached
            rec.reusable_tokens += fact.reusable_tokens
            rec.missed_reusable_tokens += max(fact.reusable_tokens - cached, 0)
            rec.num_calls += 1
            finish_s[0] = max(finish_s[0], self.now_s())
            done[call.call_id].set()

        try:
            await asyncio.gather(*(one_call(c) for c in spec.calls))
        finally:
            try:  # forks may finish in any order, so no call knows it is the last: close by hand
                await self.http.delete(f"/v1/sessions/{rec.session_id}")
            except httpx.HTTPError:
                pass  # the API's idle TTL closes it (and a program that never called opened none)
        rec.finish_s = finish_s[0]

    async def _call(self, session_id: str, call, outputs: dict[str, str],
                    next_tool: str | None = None, remaining_calls: int | None = None) -> tuple[str, int, int]:
        headers = {"X-Session-Id": session_id, "X-Thread-Id": call.thread_id}
        if call.parent_thread_id:
            headers["X-Parent-Thread-Id"] = call.parent_thread_id
        if next_tool:
            headers["X-Next-Tool"] = next_tool
        if remaining_calls is not None:
            headers["X-Remaining-Calls"] = str(remaining_calls)
        self.progress.calls_in_flight += 1
        pieces: list[str] = []
        tokens = cached = prompt_tokens = 0
        sent_s, sent_wall_s, first_s = time.monotonic(), time.time(), None
        try:
            stream = await self.client.chat.completions.create(
                model=self.model, messages=self.messages_for(call, outputs), max_tokens=call.output_tokens,
                stream=True, stream_options={"include_usage": True}, extra_headers=headers,
                extra_body=self.extra_body)
            async for chunk in stream:
                if chunk.usage is not None:
                    tokens, prompt_tokens = chunk.usage.completion_tokens, chunk.usage.prompt_tokens
                    details = chunk.usage.prompt_tokens_details
                    cached = (details.cached_tokens or 0) if details is not None else 0
                for choice in chunk.choices:
                    if choice.delta.content:
                        first_s = first_s or time.monotonic()
                        pieces.append(choice.delta.content)
        finally:
            self.progress.calls_in_flight -= 1
        self.call_times.append({"session_id": session_id, "call_id": call.call_id, "thread_id": call.thread_id,
                                "prompt_tokens": prompt_tokens, "output_tokens": tokens, "sent_s": sent_s,
                                "sent_wall_s": sent_wall_s, "first_token_s": first_s, "end_s": time.monotonic()})
        self.progress.calls_done += 1
        self.progress.tokens += tokens
        return "".join(pieces), tokens, cached
