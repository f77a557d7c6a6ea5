"""Per-service scaling: calls/s and CPU per call per service with 1, 2 and 4 session API workers
and 1 and 2 routers, and what those costs predict for a bigger host.

    python -m loadgen.bench.scaling [--json PATH] [--seconds 5] [--concurrency 64] [--repeats 3]

Each configuration is its own `autellix up --engines 1 --api-workers W --routers R` with the
zero-time engine (TIME_SCALE=0) and the default limits on (shared by the workers: the owner's
cost is in the figures; two configurations without them measure that cost). One-token chat calls over the lean keep-alive client from
`--concurrency` connections (the kernel spreads them over the workers, SO_REUSEPORT) for
`--seconds`, after a warm-up; every answer is checked. Configurations are interleaved (all of
them, then all again) so drift in a shared machine's load hits each alike; CPU per call comes
per service (all its processes) and per process, with the load average around each window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import psutil

from loadgen.bench import worker_split
from loadgen.bench.cpu import CpuWindow, load_average, stack_role
from loadgen.bench.scaling_model import predict
from loadgen.bench.spread import summary
from loadgen.live.lean_http import LeanHttpPool
from loadgen.live.mesh_bench import CHAT_BODY
from loadgen.live.real_servers import report
from loadgen.live.stack_process import start_stack
from loadgen.results_json import write_json
from runtime.catalog import service_names

# (API workers, routers, tenant limits shared): the grid, then two without the shared limits (their cost)
CONFIGS = (*((workers, routers, True) for routers in (1, 2) for workers in (1, 2, 4)), (1, 1, False), (2, 1, False))
PREDICT_CORES = (2, 8, 16, 64)


def _per_process_role(proc):
    role = stack_role(proc)
    return None if role is None else f"{role}#{proc.pid}"


def _postgres(state_dir: Path) -> dict[str, int]:
    """The stack's PostgreSQL server (pg_ctl detaches it from the supervisor's tree): its
    postmaster, whose backends are its children."""
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or ())
        if "postgres" in cmd and str(state_dir) in cmd and "-D" in cmd:
            return {"postgres#" + str(proc.pid): proc.pid}
    return {}


def _by_service(per_process: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, ms in per_process.items():
        service = key.split("#")[0]
        out[service] = round(out.get(service, 0.0) + ms, 4)
    return out


async def _calls(pool: LeanHttpPool, request: bytes, seconds: float, concurrency: int,
                 ) -> tuple[int, dict[str, int], float]:
    """(calls answered 200, refusals by status and error code, seconds): a refusal (a worker that
    lost sight of the engine on an overloaded host answers 503 no_engine) is counted, not fatal."""
    deadline = time.perf_counter() + seconds
    count = 0
    errors: dict[str, int] = {}

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            status, data = await pool.send(request)
            answer = json.loads(data)
            if status != 200:
                key = f"{status} {answer.get('error', {}).get('code')}"
                errors[key] = errors.get(key, 0) + 1
                await asyncio.sleep(0.01)  # as a client backing off
                continue
            if answer["usage"]["completion_tokens"] != 1 or not answer["choices"][0]["message"]["content"]:
                raise RuntimeError(f"unexpected answer: {answer}")
            count += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count, errors, time.perf_counter() - t0


async def measure(workers: int, routers: int, shared_limits: bool, seconds: float, concurrency: int,
                  port: int) -> dict:
    env = {"TIME_SCALE": "0", "LOG_LEVEL": "warning", "SHARED_LIMITS": str(shared_limits).lower()}
    stack = await asyncio.to_thread(start_stack, "atlas", 1, port, "lite", 180.0, None, env,
                                    ("--api-workers", str(workers), "--routers", str(routers)))
    try:  # `autellix up` is ready once every worker answers on its own port (start_stack waits for it)
        api = worker_split.api_workers(stack.state_dir)
        async with LeanHttpPool(stack.url, concurrency) as pool:
            request = pool.request_bytes("/v1/chat/completions", json.dumps(CHAT_BODY).encode(),
                                         {"Authorization": f"Bearer {stack.api_key}"})
            await _calls(pool, request, min(2.0, seconds), concurrency)  # warm-up: every worker, every connection
            calls_before = await worker_split.calls_so_far(api)
            load_start = load_average()
            window = CpuWindow(pids=_postgres(stack.state_dir), tree_roles={stack.proc.pid: _per_process_role}).start()
            count, errors, elapsed_s = await _calls(pool, request, seconds, concurrency)
            per_process = window.per_unit_ms(count)
            conns = worker_split.connections(api, port)
            workers_split = worker_split.split(calls_before, await worker_split.calls_so_far(api), conns)
    finally:
        await asyncio.to_thread(stack.stop)
    client = per_process.pop("client")
    per_process.pop("total")
    per_service = _by_service(per_process)
    per_service["client"] = client
    return {"api_workers": workers, "routers": routers, "shared_limits": shared_limits, "calls": count,
            "refused": errors, "calls_per_s": round(count / elapsed_s, 1),
            "cpu_ms_per_call": per_service,
            "cpu_ms_per_call_serving": round(sum(v for k, v in per_service.items() if k != "client"), 4),
            "cpu_ms_per_call_per_process": per_process,
            # connections and calls per API worker: the kernel hashes connections (worker_split.py)
            "workers_split": workers_split,
            "load_average_1m": [load_start, load_average()]}


def _summarize(runs: list[dict]) -> list[dict]:
    out = []
    configs = sorted({(r["api_workers"], r["routers"], r["shared_limits"]) for r in runs},
                     key=lambda c: (not c[2], c[1], c[0]))
    for workers, routers, shared in configs:
        mine = [r for r in runs if (r["api_workers"], r["routers"], r["shared_limits"]) == (workers, routers, shared)]
        services = sorted({s for r in mine for s in r["cpu_ms_per_call"]})
        cpu = {s: summary([r["cpu_ms_per_call"].get(s) for r in mine], 4) for s in services}
        median_cpu = {s: c["median"] for s, c in cpu.items() if c["median"] is not None}
        instances = {"session_api": workers, "router": routers}
        out.append({
            "api_workers": workers, "routers": routers, "shared_limits": shared,
            "calls_per_s": summary([r["calls_per_s"] for r in mine], 1),
            "refused_per_run": [sum(r["refused"].values()) for r in mine],
            "largest_worker_share_per_run": [r["workers_split"]["largest_share"] for r in mine if "workers_split" in r],
            # the cores the stack and its client actually got: calls/s x their CPU per call (a
            # shared host gives the stack much less than its 2 cores)
            "cores_used": summary([r["calls_per_s"] * (r["cpu_ms_per_call_serving"] + r["cpu_ms_per_call"]["client"])
                                   / 1e3 for r in mine], 2),
            "cpu_ms_per_call": cpu,
            "cpu_ms_per_call_serving": summary([r["cpu_ms_per_call_serving"] for r in mine], 4),
            # each service's CPU per call over the engine agent's in the same run: the engine does
            # the same work in every configuration, so this ratio cancels most of a shared host's
            # drift (contention inflates every process's CPU per call alike)
            "cpu_over_engine_agent": {s: summary([r["cpu_ms_per_call"].get(s, 0.0) / r["cpu_ms_per_call"]["engine_agent"]
                                                  for r in mine if r["cpu_ms_per_call"].get("engine_agent")], 3)
                                      for s in services if s != "engine_agent"},
            # from the median costs: N cores / the chain's CPU per call, or one process's cap
            "predicted": {str(n): predict(median_cpu, instances, n) for n in PREDICT_CORES},
        })
    return out


async def run(seconds: float, concurrency: int, repeats: int, port: int,
              configs: tuple[tuple[int, int, bool], ...] = CONFIGS, partial: Path | None = None) -> dict:
    runs = []
    load_start = load_average()
    for i in range(repeats):  # interleaved: every configuration once per round
        for workers, routers, shared in configs:
            print(f"scaling: round {i + 1}/{repeats}, {workers} API worker(s), {routers} router(s), "
                  f"limits {'shared' if shared else 'per worker'}", file=sys.stderr, flush=True)
            runs.append({"round": i + 1, **await measure(workers, routers, shared, seconds, concurrency, port)})
            if partial is not None:  # a run that dies later keeps what it measured
                partial.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    return {"engine": "lite, TIME_SCALE=0 (zero-time), 1 engine", "seconds": seconds, "concurrency": concurrency,
            "repeats": repeats, "cpu_count": os.cpu_count(), "load_average_1m_start": load_start,
            "load_average_1m_end": load_average(), "summary": _summarize(runs), "runs": runs}


SERVICES = (*service_names(), "nats", "postgres")  # the table's columns


def _ms(row: dict, service: str) -> str:
    value = row["cpu_ms_per_call"].get(service, {}).get("median")
    return "" if value is None else f"{value:.3f}"


def _predicted(row: dict, cores: str) -> str:
    p = row["predicted"][cores]
    return "" if p["calls_per_s"] is None else f"{p['calls_per_s']:,.0f} ({p['bound_by']})"


def markdown_table(result: dict) -> str:
    """The README's table: per configuration, calls/s (median and spread) and the median CPU per
    call of every service, and the prediction for 16 and 64 cores."""
    head = ["API workers", "routers", "limits", "calls/s (min-max)", "spread", "cores used", *SERVICES,
            "serving total", "client", "16 cores", "64 cores"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result["summary"]:
        cps = row["calls_per_s"]
        lines.append("| " + " | ".join([
            str(row["api_workers"]), str(row["routers"]), "shared" if row["shared_limits"] else "per worker",
            f"{cps['median']:,.0f} ({cps['min']:,.0f}-{cps['max']:,.0f})", f"{cps['spread']:.2f}",
            f"{row['cores_used']['median']:.2f}",
            *(_ms(row, s) for s in SERVICES), f"{row['cpu_ms_per_call_serving']['median']:.3f}", _ms(row, "client"),
            _predicted(row, "16"), _predicted(row, "64")]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.scaling", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="length of each measured window")
    p.add_argument("--concurrency", type=int, default=64, help="calls in flight (keep-alive connections)")
    p.add_argument("--repeats", type=int, default=3, help="rounds over every configuration")
    p.add_argument("--configs", default="", help="comma list of WORKERSxROUTERS, with a trailing L for limits "
                   "per worker (SHARED_LIMITS=false); default 1x1,2x1,4x1,1x2,2x2,4x2,1x1L,2x1L")
    p.add_argument("--port", type=int, default=8198)
    p.add_argument("--json", dest="json_path")
    p.add_argument("--table", dest="table_from", help="summarize the runs of a results JSON again (into --json "
                   "when given), print its markdown table and exit")
    args = p.parse_args(argv)
    if args.table_from:  # the summary is made again from the runs, by this code
        result = json.loads(Path(args.table_from).read_text())
        result["summary"] = _summarize(result["runs"])
        if args.json_path:
            write_json(args.json_path, result)
        print(markdown_table(result))
        return 0
    if args.seconds <= 0 or args.concurrency < 1 or args.repeats < 1:
        raise SystemExit("--seconds must be > 0, --concurrency and --repeats >= 1")
    try:
        configs = tuple((*(int(n) for n in c.removesuffix("L").split("x")), not c.endswith("L"))
                        for c in args.configs.split(",") if c) or CONFIGS
        if any(len(c) != 3 or min(c[:2]) < 1 for c in configs):
            raise ValueError
    except ValueError:
        raise SystemExit(f"--configs takes WORKERSxROUTERS items such as 2x1, got {args.configs!r}") from None
    partial = Path(args.json_path).with_suffix(".partial.json") if args.json_path else None
    result = asyncio.run(run(args.seconds, args.concurrency, args.repeats, args.port, configs, partial))
    if partial is not None:
        partial.unlink(missing_ok=True)
    return report(result, args.json_path, "python -m loadgen.bench.scaling", argv)


if __name__ == "__main__":
    sys.exit(main())
