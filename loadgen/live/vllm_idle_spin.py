"""What vLLM's CPU engine spends while it has nothing to do, after one call.

    python -m loadgen.live.vllm_idle_spin [--calls 5] [--after-s 3] [--json PATH]

Starts vLLM's own OpenAI server on the tiny model (as `loadgen.live.real_overhead` does), lets it
go idle, then sends one 9-token call at a time. For `--after-s` seconds after each call ends it
samples every process's CPU time (user + system) every 100 ms, with nothing else sent. So the
figures show the CPU each process keeps using once a call is done; the baseline is an idle window
taken long after a call. Reported per process: the CPU share (cores) in each 100 ms window, as the
median over the calls.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from loadgen.live.real_overhead import _cpu_by_process, _stream_call, server_env, start_direct
from loadgen.live.real_servers import report, stop

WINDOW_S = 0.1


async def _windows(pid: int, seconds: float) -> list[dict[str, float]]:
    """CPU share (cores) of each process in consecutive WINDOW_S windows."""
    out = []
    before, t0 = _cpu_by_process(pid), time.perf_counter()
    for _ in range(round(seconds / WINDOW_S)):
        await asyncio.sleep(WINDOW_S)
        after, t1 = _cpu_by_process(pid), time.perf_counter()
        out.append({name: round((after[name] - before.get(name, 0.0)) / (t1 - t0), 3) for name in after})
        before, t0 = after, t1
    return out


def _median_by_window(runs: list[list[dict[str, float]]]) -> dict[str, list[float]]:
    names = sorted({n for run in runs for w in run for n in w})
    return {n: [round(statistics.median(run[i].get(n, 0.0) for run in runs), 3) for i in range(len(runs[0]))]
            for n in names}


async def run(calls: int, after_s: float, idle_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="autellix-idle-spin-") as tmp:
        proc, url = await asyncio.to_thread(start_direct, Path(tmp), server_env(), time.monotonic() + 400)
        try:
            async with httpx.AsyncClient(timeout=120) as http:
                for _ in range(3):  # warm
                    await _stream_call(http, url, "warm the engine up", 9)
                await asyncio.sleep(idle_s)
                idle = await _windows(proc.pid, 2.0)
                after = []
                for i in range(calls):
                    await _stream_call(http, url, f"call {i}: plan the next step", 9)
                    after.append(await _windows(proc.pid, after_s))
                    await asyncio.sleep(idle_s)
        finally:
            stop(proc)
    return {"benchmark": "vLLM's OpenAI server (tiny model, CPU) after one call, nothing else sent",
            "window_s": WINDOW_S, "calls": calls, "after_s": after_s, "idle_between_s": idle_s,
            "idle_cores": {n: statistics.median(w.get(n, 0.0) for w in idle) for n in idle[0]},
            "after_call_cores_median": _median_by_window(after)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.vllm_idle_spin", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--after-s", type=float, default=3.0, help="seconds sampled after each call")
    p.add_argument("--idle-s", type=float, default=4.0, help="idle seconds before the baseline and between calls")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    result = asyncio.run(run(args.calls, args.after_s, args.idle_s))
    return report(result, args.json, "python -m loadgen.live.vllm_idle_spin", argv)


if __name__ == "__main__":
    raise SystemExit(main())
