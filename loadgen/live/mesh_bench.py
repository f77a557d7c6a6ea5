"""Mesh overhead benchmark: what the serving path adds to a call, and how many calls/s it carries.

    python -m loadgen.live.mesh_bench [--json PATH] [--calls 400] [--seconds 10] [--concurrency 64]

Starts `autellix up --engines 1` with a zero-time engine (`TIME_SCALE=0`: modeled steps are not
slept, so a call costs only the engine model's CPU), then measures one-token calls:
- direct: a RunCall sent straight to the engine agent over NATS, tokens read from its subject;
- full: the same call through HTTP -> session_api -> router -> engine agent -> tokens -> HTTP.
Added latency = percentile(full) - percentile(direct), sequential calls. Throughput: full-path
calls with `--concurrency` in flight for `--seconds`, with one router, then with a second router
replica started beside the stack.

The HTTP client is a lean keep-alive HTTP/1.1 client (`--client lean`, default), so the client's
own CPU does not cap what is measured on a 2-core machine: httpx cost about 2.9 ms of CPU per call
here, more than any service of the stack (`--client httpx` keeps it for comparison). Every answer
is checked: status 200, one completion token, non-empty text.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psutil

from loadgen.live.lean_http import LeanHttpPool
from loadgen.live.report import percentile
from loadgen.live.stack_process import start_stack
from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import decode

PROMPT = "x" * 64  # 16 tokens


class DirectEngine:
    """Calls sent straight to an engine agent; token chunks come back on one wildcard subscription
    of an inbox (as the API takes them), so the baseline pays no per-call subscribe."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._inbox = bus.nc.new_inbox()
        self._done: dict[str, asyncio.Event] = {}

    async def start(self) -> DirectEngine:
        await self._bus.nc.subscribe(f"{self._inbox}.*", cb=self._on_chunk)
        await self._bus.nc.flush()
        return self

    async def _on_chunk(self, raw) -> None:
        body = decode(raw.data).body
        if isinstance(body, m.TokenChunk) and body.done and body.call_id in self._done:
            if body.error_code or body.output_tokens != 1:
                raise RuntimeError(f"unexpected end of a direct call: {body}")
            self._done[body.call_id].set()

    async def call(self, engine_id: str) -> float:
        call_id = uuid.uuid4().hex
        done = self._done[call_id] = asyncio.Event()
        t0 = time.perf_counter()
        route = m.RouteCall(call_id=call_id, program_id=f"bench-{call_id}", prompt_tokens=16,
                            prompt_segments=[(f"bench:{call_id}", 16)], max_tokens=1,
                            reply_subject=f"{self._inbox}.{call_id}", tenant="bench")
        try:
            await self._bus.request(subjects.engine_commands(engine_id), m.RunCall(call=route, engine_id=engine_id),
                                    timeout_s=5.0)
            await asyncio.wait_for(done.wait(), 10.0)
            return time.perf_counter() - t0
        finally:
            del self._done[call_id]


CHAT_BODY = {"model": "bench", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1}


def _check_answer(answer: dict) -> None:
    if answer["usage"]["completion_tokens"] != 1 or not answer["choices"][0]["message"]["content"]:
        raise RuntimeError(f"unexpected answer: {answer}")


class LeanHttp:
    """One fixed chat request, sent over the lean keep-alive pool (`loadgen.live.lean_http`)."""

    def __init__(self, url: str, api_key: str, size: int) -> None:
        self._pool = LeanHttpPool(url, size)
        self._request = self._pool.request_bytes("/v1/chat/completions", json.dumps(CHAT_BODY).encode(),
                                                 {"Authorization": f"Bearer {api_key}"})

    async def __aenter__(self) -> LeanHttp:
        await self._pool.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._pool.__aexit__(*exc)

    async def chat(self) -> dict:
        status, data = await self._pool.send(self._request)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {data[:300]!r}")
        return json.loads(data)


class HttpxChat:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def chat(self) -> dict:
        resp = await self._http.post("/v1/chat/completions", json=CHAT_BODY)
        resp.raise_for_status()
        return resp.json()


async def _full_call(http: LeanHttp | HttpxChat) -> float:
    t0 = time.perf_counter()
    answer = await http.chat()
    elapsed = time.perf_counter() - t0
    _check_answer(answer)
    return elapsed


async def _throughput(http: LeanHttp | HttpxChat, seconds: float, concurrency: int) -> float:
    deadline = time.perf_counter() + seconds
    count = 0

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await _full_call(http)
            count += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - t0)


def _role(proc: psutil.Process) -> str | None:
    """Which part of the stack a process is (services by module name, then the two servers)."""
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return None
    for name in ("session_api", "router", "engine_agent", "process_table", "controller"):
        if f"services.{name}" in cmd:
            return name
    if "nats-server" in cmd:
        return "nats"
    if "postgres" in cmd:
        return "postgres"
    return None


def _cpu_s_by_role(root_pid: int, extra_pids: tuple[int, ...] = ()) -> dict[str, float]:
    """CPU seconds (user + system) so far of the stack's processes (and `extra_pids`), per role."""
    totals: dict[str, float] = {}
    try:
        procs = psutil.Process(root_pid).children(recursive=True) + [psutil.Process(p) for p in extra_pids]
    except psutil.Error:
        return totals
    for proc in procs:
        role = _role(proc)
        if role is None:
            continue
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        totals[role] = totals.get(role, 0.0) + t.user + t.system
    return totals


async def _measured_throughput(http: LeanHttp | HttpxChat, seconds: float, concurrency: int,
                               root_pid: int, extra_pids: tuple[int, ...] = ()) -> tuple[float, dict[str, float]]:
    """Calls/s and the CPU each part of the stack (and this client) spent per call meanwhile."""
    cpu_before = _cpu_s_by_role(root_pid, extra_pids)
    client_before = time.process_time()
    t0 = time.perf_counter()
    rate = await _throughput(http, seconds, concurrency)
    num_calls = rate * (time.perf_counter() - t0)
    cpu_after = _cpu_s_by_role(root_pid, extra_pids)
    cpu_ms_per_call = {role: round((cpu_after[role] - cpu_before.get(role, 0.0)) / num_calls * 1e3, 3)
                       for role in sorted(cpu_after)}
    cpu_ms_per_call["bench_client"] = round((time.process_time() - client_before) / num_calls * 1e3, 3)
    cpu_ms_per_call["total"] = round(sum(cpu_ms_per_call.values()), 3)
    return rate, cpu_ms_per_call


def _stats_ms(values: list[float]) -> dict:
    vs = sorted(values)
    return {"p50": percentile(vs, 50) * 1e3, "p99": percentile(vs, 99) * 1e3, "mean": sum(vs) / len(vs) * 1e3}


@contextlib.asynccontextmanager
async def _client(kind: str, url: str, api_key: str, concurrency: int):
    if kind == "lean":
        async with LeanHttp(url, api_key, concurrency) as http:
            yield http
        return
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30.0,
                                 headers={"Authorization": f"Bearer {api_key}"}) as http:
        yield HttpxChat(http)


async def run_bench(calls: int, seconds: float, concurrency: int, port: int, client: str = "lean") -> dict:
    stack = await asyncio.to_thread(start_stack, "atlas", 1, port, "lite", 120.0, None,
                                    {"TIME_SCALE": "0", "LOG_LEVEL": "warning"})
    extra_router = None
    try:
        bus = await Bus.connect(stack.nats_url, "mesh_bench", 5.0)
        async with _client(client, stack.url, stack.api_key, concurrency) as http:
            direct_engine = await DirectEngine(bus).start()
            for _ in range(50):  # warm up both paths
                await direct_engine.call("e0")
                await _full_call(http)
            direct, full = [], []
            for _ in range(calls):  # interleaved, so drift in the machine's load hits both alike
                direct.append(await direct_engine.call("e0"))
                full.append(await _full_call(http))
            load_start = os.getloadavg()[0]
            one_router, cpu_ms_per_call = await _measured_throughput(http, seconds, concurrency, stack.proc.pid)
            extra_router = subprocess.Popen([sys.executable, "-m", "services.router"],
                                            env={**os.environ, "NATS_URL": stack.nats_url, "LOG_LEVEL": "warning"},
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(3.0)  # joins the queue group and hears a heartbeat
            two_routers, cpu_two_routers = await _measured_throughput(http, seconds, concurrency, stack.proc.pid,
                                                                      (extra_router.pid,))
        await bus.close()
    finally:
        if extra_router is not None:
            extra_router.terminate()
            extra_router.wait(10)
        await asyncio.to_thread(stack.stop)
    d, f = _stats_ms(direct), _stats_ms(full)
    return {
        "engine": "lite, TIME_SCALE=0 (zero-time)",
        "calls": calls,
        "direct_ms": d,
        "full_ms": f,
        "added_latency_ms": {"p50": f["p50"] - d["p50"], "p99": f["p99"] - d["p99"]},
        "calls_per_s": one_router,
        "calls_per_s_two_routers": two_routers,
        "concurrency": concurrency,
        "client": client,
        # CPU each part of the stack spent per call in the one-router window (the bench's own
        # client included: it shares the machine's cores with the stack)
        "cpu_ms_per_call": cpu_ms_per_call,
        "cpu_ms_per_call_two_routers": cpu_two_routers,
        "cpu_count": os.cpu_count(),
        # the machine's load around the run (other work on it inflates CPU per call and cuts calls/s)
        "load_average_1m_start": load_start,
        "load_average_1m": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.mesh_bench", description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--port", type=int, default=8199)
    p.add_argument("--client", choices=("lean", "httpx"), default="lean", help="HTTP client of the full path")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args(argv)
    result = asyncio.run(run_bench(args.calls, args.seconds, args.concurrency, args.port, args.client))
    text = json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                       for k, v in result.items()}, indent=1)
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
