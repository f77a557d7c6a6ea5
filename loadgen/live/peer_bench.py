"""Autellix beside a peer, in front of the same upstream in the same run: the upstream called
directly, through `vllm-router` (a Rust load balancer for vLLM), and through the full mesh
(`autellix up --upstream URL`: session API -> router -> engine agent -> upstream).

    python -m loadgen.live.peer_bench --upstream stub|vllm [--json PATH]

`--upstream stub`: a zero-time OpenAI-compatible server (`loadgen.live.stub_openai`), so every
millisecond measured is the front end's own. `--upstream vllm`: a real `vllm serve` on the tiny
model (CPU; the flags the other real-engine benchmarks use). Each repeat first sends `--calls`
sequential streamed calls per side, interleaved (direct, router, mesh, in rotating order, so drift
in the machine's load hits all alike): end-to-end and first-token latency; then `--concurrency`
streams per side for `--seconds` each: calls/s and CPU per call of every process (the upstream,
vllm-router, each mesh service, NATS, PostgreSQL, this client). Added latency = a side's
percentile minus the direct call's in the same repeat. Every answer is checked (200, a token, the
stream's end). Repeated `--repeats` times: min / median / max and the spread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen.bench import servers
from loadgen.bench.cpu import CpuWindow, load_average, stack_role
from loadgen.bench.spread import ratio, summarize_runs
from loadgen.live.lean_http import LeanHttpPool
from loadgen.live.real_servers import API_KEY, REPO_ROOT, installed_binary, stop, wait_ready
from loadgen.results_json import write_json
from shared.stats import percentile

SIDES = ("direct", "vllm_router", "mesh")
PROMPT = "plan the next step of the agent and read the file " * 2
DEFAULTS = {  # per upstream: sequential calls, streams in flight, seconds per window, tokens per call
    "stub": {"calls": 200, "concurrency": 32, "seconds": 5.0, "max_tokens": 8},
    "vllm": {"calls": 20, "concurrency": 4, "seconds": 10.0, "max_tokens": 16},
}


def vllm_router_binary() -> str:
    """The `vllm-router` launcher of this environment (pip package vllm-router)."""
    return installed_binary("vllm-router", "pip install vllm-router==0.1.17 (make setup does)")


class Sides:
    """The upstream, vllm-router and the mesh, as child processes in one state folder."""

    def __init__(self, kind: str, state: Path, token_gap_ms: float = 0.0) -> None:
        self.kind, self.state = kind, state
        self.token_gap_ms = token_gap_ms  # the stub's time between events (0: a stream in one write)
        self.procs: dict[str, subprocess.Popen] = {}
        self.urls: dict[str, str] = {}

    def start(self, startup_s: float) -> Sides:
        from shared.engine.tiny_model import make_tiny_model

        deadline = time.monotonic() + startup_s
        model_dir = make_tiny_model(self.state / "tiny-model")
        env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
        # the mesh logs at warning, as vllm-router is started (--log-level warning): at info the API
        # writes an access-log line per request, which neither peer is asked to do
        env |= {"AUTELLIX_API_KEYS": f"bench:{API_KEY}", "HF_HUB_OFFLINE": "1", "LOG_LEVEL": "warning"}
        ports = {side: servers.free_port() for side in SIDES}
        self.urls = {side: f"http://127.0.0.1:{port}" for side, port in ports.items()}
        if self.kind == "stub":
            self.procs["direct"] = servers.start_module(
                "loadgen.live.stub_openai", "--port", str(ports["direct"]), "--model", "tiny", "--root", str(model_dir),
                "--token-gap-ms", str(self.token_gap_ms))
        else:
            from services.engine_agent.vllm_main import TINY_MODEL_VLLM_ARGS

            self.procs["direct"] = subprocess.Popen(
                [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
                 "--served-model-name", "tiny", "--port", str(ports["direct"]), "--host", "127.0.0.1",
                 "--scheduling-policy", "priority", *TINY_MODEL_VLLM_ARGS],
                cwd=self.state, env=env, stdout=open(self.state / "vllm.log", "w"), stderr=subprocess.STDOUT)
        wait_ready(self.urls["direct"], self.procs["direct"], deadline, self.state)
        self.procs["vllm_router"] = subprocess.Popen(
            [vllm_router_binary(), "--host", "127.0.0.1", "--port", str(ports["vllm_router"]), "--worker-urls",
             self.urls["direct"], "--policy", "round_robin", "--log-level", "warning"],
            cwd=self.state, env=env, stdout=open(self.state / "vllm_router.log", "w"), stderr=subprocess.STDOUT)
        self.procs["mesh"] = subprocess.Popen(
            [sys.executable, "-m", "autellix", "up", "--upstream", self.urls["direct"], "--state-dir",
             str(self.state / "mesh"), "--port", str(ports["mesh"]), "--nats-port", "0",
             "--startup-timeout", str(int(startup_s))],
            cwd=REPO_ROOT, env=env, stdout=open(self.state / "up.log", "w"), stderr=subprocess.STDOUT)
        for side in ("vllm_router", "mesh"):
            wait_ready(self.urls[side], self.procs[side], deadline, self.state)
        return self

    def stop(self) -> None:
        for side in ("mesh", "vllm_router", "direct"):
            stop(self.procs.get(side))

    def cpu_window(self) -> CpuWindow:
        pids = {"upstream": self.procs["direct"].pid, "vllm_router": self.procs["vllm_router"].pid}
        return CpuWindow(pids, {self.procs["mesh"].pid: stack_role})


class Client:
    """One prepared streamed chat request per side, sent over lean keep-alive pools."""

    def __init__(self, urls: dict[str, str], size: int, max_tokens: int) -> None:
        body = {"model": "tiny", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
                "stream": True, "temperature": 0, "ignore_eos": True}
        self.pools = {side: LeanHttpPool(url, size) for side, url in urls.items()}
        self.requests = {side: pool.request_bytes("/v1/chat/completions", body,
                                                  {"Authorization": f"Bearer {API_KEY}"})
                         for side, pool in self.pools.items()}

    async def __aenter__(self) -> Client:
        for pool in self.pools.values():
            await pool.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        for pool in self.pools.values():
            await pool.__aexit__(*exc)

    async def call(self, side: str) -> tuple[float, float]:
        """(end-to-end, first token) seconds of one streamed call; raises on a wrong answer."""
        t0 = time.perf_counter()
        status, data, first = await self.pools[side].send_timed(self.requests[side])
        end = time.perf_counter()
        if status != 200 or first is None or b"[DONE]" not in data:
            raise RuntimeError(f"{side}: HTTP {status}, answer {data[:300]!r}")
        return end - t0, first - t0


async def _rate(client: Client, side: str, seconds: float, concurrency: int) -> tuple[float, float]:
    """(calls/s, seconds) with `concurrency` streams in flight for `seconds`."""
    deadline = time.perf_counter() + seconds
    count = 0

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await client.call(side)
            count += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    return count / elapsed, elapsed


def _ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1e3


async def _repeat(client: Client, sides: Sides, index: int, calls: int, seconds: float, concurrency: int) -> dict:
    samples: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}
    for i in range(calls):
        shift = (i + index) % len(SIDES)
        for side in SIDES[shift:] + SIDES[:shift]:
            samples[side].append(await client.call(side))
    latency = {}
    for side, pairs in samples.items():
        e2e, ttft = [p[0] for p in pairs], [p[1] for p in pairs]
        latency[side] = {"e2e_p50_ms": _ms(e2e, 50), "e2e_p99_ms": _ms(e2e, 99), "ttft_p50_ms": _ms(ttft, 50),
                         "ttft_p99_ms": _ms(ttft, 99)}
    added = {side: {k.replace("_ms", "_added_ms"): v - latency["direct"][k] for k, v in latency[side].items()}
             for side in SIDES if side != "direct"}
    throughput = {}
    order = SIDES[index % len(SIDES):] + SIDES[:index % len(SIDES)]
    for side in order:
        window = sides.cpu_window().start()
        rate, elapsed = await _rate(client, side, seconds, concurrency)
        throughput[side] = {"calls_per_s": rate, "cpu_ms_per_call": window.per_unit_ms(rate * elapsed)}
    mesh, router = throughput["mesh"]["calls_per_s"], throughput["vllm_router"]["calls_per_s"]
    return {
        "latency_ms": latency, "added_ms": added, "throughput": throughput,
        "mesh_vs_vllm_router": {
            "calls_per_s_ratio": ratio(mesh, router),
            "e2e_p50_added_over_router_ms": latency["mesh"]["e2e_p50_ms"] - latency["vllm_router"]["e2e_p50_ms"],
            "e2e_p99_added_over_router_ms": latency["mesh"]["e2e_p99_ms"] - latency["vllm_router"]["e2e_p99_ms"],
            "ttft_p50_added_over_router_ms": (latency["mesh"]["ttft_p50_ms"]
                                              - latency["vllm_router"]["ttft_p50_ms"])},
        "fraction_of_direct_calls_per_s": {side: ratio(throughput[side]["calls_per_s"],
                                                       throughput["direct"]["calls_per_s"]) for side in SIDES},
    }


async def measure(sides: Sides, repeats: int, calls: int, seconds: float, concurrency: int, max_tokens: int) -> dict:
    runs = []
    async with Client(sides.urls, concurrency, max_tokens) as client:
        for side in SIDES:  # warm-up: connections, the mesh's tokenizer, vLLM's first steps
            for _ in range(5):
                await client.call(side)
        for i in range(repeats):
            print(f"peer bench: repeat {i + 1} of {repeats}", file=sys.stderr, flush=True)
            runs.append(await _repeat(client, sides, i, calls, seconds, concurrency))
    return {"summary": summarize_runs(runs), "runs": runs}


def _print_logs(state: Path, lines: int = 15) -> None:
    for log in sorted([*state.glob("*.log"), *state.glob("mesh/logs/*.log")]):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        print(f"--- {log.relative_to(state)}\n" + "\n".join(tail), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.peer_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", choices=tuple(DEFAULTS), required=True)
    p.add_argument("--calls", type=int, help="sequential calls per side per repeat (default: by upstream)")
    p.add_argument("--concurrency", type=int, help="streams in flight in the throughput windows")
    p.add_argument("--seconds", type=float, help="length of each throughput window")
    p.add_argument("--max-tokens", type=int, help="tokens per call")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--startup-timeout", type=float, default=400.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    conf = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in DEFAULTS[args.upstream].items()}
    state = Path(tempfile.mkdtemp(prefix="autellix-peer-", dir="/tmp"))
    sides = Sides(args.upstream, state)
    load_start = load_average()
    try:
        sides.start(args.startup_timeout)
        result = asyncio.run(measure(sides, args.repeats, conf["calls"], conf["seconds"], conf["concurrency"],
                                     conf["max_tokens"]))
    except BaseException:
        _print_logs(state)  # the state folder goes with the run: say what its servers said first
        raise
    finally:
        sides.stop()
        shutil.rmtree(state, ignore_errors=True)
    result = {
        "benchmark": "direct vs vllm-router vs the Autellix mesh (backend upstream), same upstream, same run",
        "command": "python -m loadgen.live.peer_bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "upstream": {"stub": "zero-time OpenAI-compatible stub (loadgen.live.stub_openai)",
                     "vllm": "vllm serve, tiny model, CPU"}[args.upstream],
        "vllm_router": "vllm-router 0.1.17, --policy round_robin, defaults otherwise",
        "mesh": "autellix up --upstream URL (session API, router, engine agent, process table, controller), "
                "LOG_LEVEL=warning",
        **conf, "repeats": args.repeats,
        "targets": {"calls_per_s_ratio_min": 0.5, "e2e_p50_added_over_router_ms_max": 1.0,
                    "e2e_p99_added_ms_max": 5.0, "spread_max": 0.15},
        "cpu_count": os.cpu_count(), "load_average_1m": [load_start, load_average()],
        **result,
    }
    print(json.dumps(result, indent=1))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
