"""Mesh overhead benchmark: what the serving path adds to a call, and how many calls/s it carries.

    python -m loadgen.live.mesh_bench [--json PATH] [--calls 300] [--seconds 5] [--concurrency 64] [--repeats 3]

Starts `autellix up --engines 1` with a zero-time engine (`TIME_SCALE=0`: modeled steps are not
slept, so a call costs only the engine model's CPU), then measures one-token calls:
- direct: a RunCall sent straight to the engine agent over NATS, tokens read from its subject;
- full: the same call through HTTP -> session_api -> router -> engine agent -> tokens -> HTTP;
- bare HTTP: a bare uvicorn endpoint answering the full path's bytes.
Added latency = percentile(full) - percentile(direct), sequential calls interleaved. Throughput:
full-path calls with `--concurrency` in flight for `--seconds`, beside the same-run ceilings that
bound it (`loadgen.bench.mesh_ceilings`: direct engine calls/s, the bare endpoint, one NATS
request/reply hop, JetStream publish and pull+ack on the stack's own NATS server) as fractions of
each, with the CPU per call of every process. Everything is repeated `--repeats` times (min /
median / max and the spread); then one window with a second router replica beside the stack.

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
import os
import subprocess
import sys
import time
import uuid

import httpx

from loadgen.bench.cpu import CpuWindow, load_average, stack_role
from loadgen.bench.mesh_ceilings import CeilingServers, guarded
from loadgen.bench.nats_access import role_url
from loadgen.bench.spread import ratio, summarize_runs
from loadgen.live.lean_http import LeanHttpPool
from loadgen.live.mesh_bench_args import add_arguments
from loadgen.live.real_servers import report
from loadgen.live.stack_process import start_stack
from loadgen.results_json import finite
from runtime.catalog import service
from runtime.processes import python_module_argv
from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import decode
from shared.protocol.programs import one_call_program_id
from shared.stats import percentile

PROMPT = "x" * 64  # 16 tokens


class DirectEngine:
    """Calls sent straight to an engine agent; token chunks come back on one wildcard subscription
    of an inbox (as the API takes them), so the baseline pays no per-call subscribe."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        # under the API's inbox prefix: with NATS auth on, engines may send token chunks only there
        self._inbox = f"_INBOX.session_api.bench{uuid.uuid4().hex[:12]}"
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
        # a one-call program, as the API sends a call without a session (the mesh path measured beside it)
        route = m.RouteCall(call_id=call_id, program_id=one_call_program_id(call_id), prompt_tokens=16,
                            prompt_segments=[(f"bench:{call_id}", 16)], max_tokens=1,
                            reply_subject=f"{self._inbox}.{call_id}", tenant="bench")
        try:
            await self._bus.request(subjects.engine_commands(engine_id), m.RunCall(call=route, engine_id=engine_id),
                                    timeout_s=5.0)
            await asyncio.wait_for(done.wait(), 10.0)
            return time.perf_counter() - t0
        finally:
            del self._done[call_id]


CHAT_BODY = {"model": "autellix-lite", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1}


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


async def _direct_throughput(engine: DirectEngine, seconds: float, concurrency: int) -> float:
    """Direct engine calls/s with `concurrency` in flight: the engine's own ceiling."""
    deadline = time.perf_counter() + seconds
    count = 0

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await engine.call("e0")
            count += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - t0)


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


def _completion_bytes(bus: Bus) -> bytes:
    """A call-completed event as the engine publishes it (the JetStream ceiling's message)."""
    return bus.publisher.encode(m.CallCompleted(
        call_id=uuid.uuid4().hex, program_id=f"bench-{uuid.uuid4().hex}", tenant="bench", engine_id="e0",
        service_s=0.001, wait_s=0.0, prompt_tokens=16, output_tokens=1, completed_at_ns=time.time_ns()))


def _run_call_bytes(bus: Bus) -> bytes:
    """A routed call as the router sends it to the engine (the request/reply ceiling's request)."""
    call_id = uuid.uuid4().hex
    route = m.RouteCall(call_id=call_id, program_id=f"call-{call_id}", prompt_tokens=16,
                        prompt_segments=[(f"bench:{call_id}", 16)], max_tokens=1, reply_subject=f"_INBOX.{call_id}",
                        tenant="bench")
    return bus.publisher.encode(m.RunCall(call=route, engine_id="e0"))


def _ratios(full_per_s: float, ceilings: dict[str, dict]) -> dict:
    """Full-path calls/s over each ceiling (None where its run failed), and which one binds."""
    out = {name: ratio(full_per_s, c.get("per_s")) for name, c in ceilings.items() if name != "jetstream"}
    jetstream = ceilings.get("jetstream", {})
    out["jetstream_publish"] = ratio(full_per_s, jetstream.get("publish_per_s"))
    out["jetstream_pull_ack"] = ratio(full_per_s, jetstream.get("pull_ack_per_s"))
    known = {k: v for k, v in out.items() if v is not None}
    out["bound_by"] = max(known, key=known.get) if known else None  # the tightest: highest fraction used
    out["of_bound"] = known[out["bound_by"]] if known else None
    return out


async def _repeat(http, bare, direct_engine: DirectEngine, ceilings: CeilingServers, bus: Bus, stack_pid: int,
                  calls: int, seconds: float, concurrency: int, js_messages: int) -> dict:
    direct, full, bare_http = [], [], []
    for _ in range(calls):  # interleaved, so drift in the machine's load hits every path alike
        direct.append(await direct_engine.call("e0"))
        full.append(await _full_call(http))
        bare_http.append(await _full_call(bare))
    window = CpuWindow(tree_roles={stack_pid: stack_role}).start()
    t0 = time.perf_counter()
    full_per_s = await _throughput(http, seconds, concurrency)
    cpu_full = window.per_unit_ms(full_per_s * (time.perf_counter() - t0))

    async def direct_ceiling() -> dict:
        window = CpuWindow(tree_roles={stack_pid: stack_role}).start()
        t0 = time.perf_counter()
        rate = await _direct_throughput(direct_engine, seconds, concurrency)
        return {"per_s": rate, "cpu_ms_per_call": window.per_unit_ms(rate * (time.perf_counter() - t0))}

    async def bare_rate() -> tuple[float, float]:
        t0 = time.perf_counter()
        return await _throughput(bare, seconds, concurrency), time.perf_counter() - t0

    measured = {
        "direct_engine": await guarded("direct engine", direct_ceiling),
        "bare_http": await guarded("bare uvicorn", lambda: ceilings.measure_http(bare_rate)),
        "nats_request": await guarded("NATS request/reply", lambda: ceilings.measure_nats_request(
            _run_call_bytes(bus), seconds, concurrency)),
        "jetstream": await guarded("JetStream", lambda: ceilings.measure_jetstream(
            _completion_bytes(bus), js_messages, 4096)),
    }
    d, f, b = _stats_ms(direct), _stats_ms(full), _stats_ms(bare_http)
    return {
        "direct_ms": d, "full_ms": f, "bare_http_ms": b,
        "added_latency_ms": {"p50": f["p50"] - d["p50"], "p99": f["p99"] - d["p99"]},
        # what is left after the two floors a full call cannot avoid: one HTTP exchange, one engine call
        "added_over_http_and_engine_ms": {"p50": f["p50"] - d["p50"] - b["p50"],
                                          "p99": f["p99"] - d["p99"] - b["p99"]},
        "calls_per_s": full_per_s, "cpu_ms_per_call": cpu_full,
        "ceilings": measured, "fraction_of_ceiling": _ratios(full_per_s, measured),
    }


async def run_bench(calls: int, seconds: float, concurrency: int, port: int, client: str = "lean",
                    repeats: int = 3, js_messages: int = 20_000, two_routers: bool = True) -> dict:
    stack = await asyncio.to_thread(start_stack, "atlas", 1, port, "lite", 120.0, None,
                                    {"TIME_SCALE": "0", "LOG_LEVEL": "warning"})
    extra_router = ceilings = None
    runs: list[dict] = []
    two = None
    try:
        nats_url = role_url(stack.state_dir, stack.nats_url, "admin")
        bus = await Bus.connect(nats_url, "mesh_bench", 5.0)
        async with _client(client, stack.url, stack.api_key, concurrency) as http:
            direct_engine = await DirectEngine(bus).start()
            answer = await _answer_bytes(stack.url, stack.api_key)
            ceilings = CeilingServers(nats_url, stack.proc.pid, answer, 64).start()
            async with _client(client, ceilings.http_url, stack.api_key, concurrency) as bare:
                for _ in range(50):  # warm up every path
                    await direct_engine.call("e0")
                    await _full_call(http)
                    await _full_call(bare)
                load_start = load_average()
                for i in range(repeats):
                    print(f"mesh bench: repeat {i + 1} of {repeats}", file=sys.stderr, flush=True)
                    runs.append(await _repeat(http, bare, direct_engine, ceilings, bus, stack.proc.pid, calls,
                                              seconds, concurrency, js_messages))
            if two_routers:
                extra_router = subprocess.Popen(python_module_argv(service("router").module),
                                                env={**os.environ, "LOG_LEVEL": "warning",
                                                     "NATS_URL": role_url(stack.state_dir, stack.nats_url, "router")},
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                await asyncio.sleep(3.0)  # joins the queue group and hears a heartbeat
                window = CpuWindow(tree_roles={stack.proc.pid: stack_role}, pids={"router_2": extra_router.pid})
                window.start()
                t0 = time.perf_counter()
                rate = await _throughput(http, seconds, concurrency)
                two = {"calls_per_s": rate, "cpu_ms_per_call": window.per_unit_ms(rate * (time.perf_counter() - t0))}
        await bus.close()
    finally:
        if ceilings is not None:
            ceilings.stop()
        if extra_router is not None:
            extra_router.terminate()
            extra_router.wait(10)
        await asyncio.to_thread(stack.stop)
    return {
        "engine": "lite, TIME_SCALE=0 (zero-time)",
        "calls": calls, "seconds": seconds, "concurrency": concurrency, "client": client, "repeats": repeats,
        # each figure over the repeats: runs, min / median / max, spread = (max - min) / median
        "summary": summarize_runs(runs),
        "runs": runs,
        # one window after the repeats, with a second router replica beside the stack
        "two_routers": two,
        "cpu_count": os.cpu_count(),
        # the machine's load around the run (other work on it inflates CPU per call and cuts calls/s)
        "load_average_1m_start": load_start,
        "load_average_1m": load_average(),
    }


async def _answer_bytes(url: str, api_key: str) -> bytes:
    """One full-path answer's bytes: what the bare endpoint sends back for every request."""
    async with LeanHttpPool(url, 1) as pool:
        status, data = await pool.post_json("/v1/chat/completions", CHAT_BODY, {"Authorization": f"Bearer {api_key}"})
    if status != 200:
        raise RuntimeError(f"the stack answered HTTP {status}: {data[:300]!r}")
    return data



def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.mesh_bench", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    result = asyncio.run(run_bench(args.calls, args.seconds, args.concurrency, args.port, args.client,
                                   args.repeats, args.js_messages, not args.no_two_routers))
    return report(finite(result), args.json_path, "autellix bench mesh", argv)


if __name__ == "__main__":
    sys.exit(main())
