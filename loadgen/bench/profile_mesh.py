"""Where each service of the mesh spends its CPU under load: py-spy on every service at once while
the bench client drives full-path calls, then the top frames per service (self and inclusive).

    python -m loadgen.bench.profile_mesh --path lite|upstream [--seconds 15] [--concurrency 32] [--json PATH]

`lite`: `autellix up --engines 1` with a zero-time engine (what `autellix bench mesh` measures),
one-token calls. `upstream`: `autellix up --upstream` in front of the zero-time stub
(`loadgen.live.stub_openai`; what `peer_bench --upstream stub` measures), streamed calls.
py-spy samples without pausing the processes (`--nonblocking`) and leaves idle threads out, so a
frame's share is its share of the service's busy samples; sampling itself costs CPU on a small
machine, so calls/s here is lower than in the benchmarks (reported for context only). A thread
that waits for a core counts as busy, so on a loaded machine `--gil` (only samples holding the GIL:
Python code running) is the closer picture of where the CPU goes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil

from loadgen.bench.cpu import SERVICES, stack_role
from loadgen.live.real_servers import installed_binary
from loadgen.results_json import write_json

TOP = 25


def py_spy_binary() -> str:
    return installed_binary("py-spy", "pip install py-spy==0.4.3 (make setup does)")


def collapsed_stacks(raw: str) -> Iterator[tuple[list[str], int]]:
    """py-spy's raw (collapsed) output as (frames, root first, without py-spy's process and thread
    pseudo-frames; samples) per stack; lines that are no stack are skipped."""
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if frames:
            yield frames, int(count)


def service_pids(root_pid: int) -> dict[str, int]:
    out = {}
    for proc in psutil.Process(root_pid).children(recursive=True):
        role = stack_role(proc)
        if role in SERVICES and role not in out:
            out[role] = proc.pid
    return out


def top_frames(raw: str, top: int = TOP) -> dict:
    """From py-spy's raw (collapsed) output: busy samples, the leaf frames (self) and every frame
    counted once per stack (inclusive), each as a share of the busy samples."""
    self_count: Counter[str] = Counter()
    incl_count: Counter[str] = Counter()
    total = 0
    for frames, n in collapsed_stacks(raw):
        total += n
        self_count[frames[-1]] += n
        for frame in set(frames):
            incl_count[frame] += n

    def share(counter: Counter[str], keep=lambda frame: True) -> list[dict]:
        kept = [(f, c) for f, c in counter.most_common() if keep(f)][:top]
        return [{"frame": f, "share": round(c / max(total, 1), 4), "samples": c} for f, c in kept]

    by_file: Counter[str] = Counter()
    for frame, c in self_count.items():  # self time per source file: which library the CPU goes to
        by_file[frame.rpartition("(")[2].rpartition(":")[0] or frame] += c
    return {"busy_samples": total, "self": share(self_count), "self_by_file": share(by_file),
            # the project's own frames, inclusive: which of our functions the time is spent under
            "inclusive_project": share(incl_count, lambda f: "(services/" in f or "(shared/" in f)}


def record(pids: dict[str, int], seconds: float, rate: int, out_dir: Path, gil: bool) -> dict[str, subprocess.Popen]:
    spy = py_spy_binary()
    procs = {}
    for role, pid in pids.items():
        procs[role] = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", str(rate), "--nonblocking",
             *(["--gil"] if gil else []), "--format", "raw", "--output", str(out_dir / f"{role}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return procs


async def _lite_load(seconds: float, concurrency: int, port: int, gil: bool) -> tuple[dict, float]:
    from loadgen.live.mesh_bench import LeanHttp, _throughput
    from loadgen.live.stack_process import start_stack

    stack = await asyncio.to_thread(start_stack, "atlas", 1, port, "lite", 120.0, None,
                                    {"TIME_SCALE": "0", "LOG_LEVEL": "warning"})
    try:
        async with LeanHttp(stack.url, stack.api_key, concurrency) as http:
            await _throughput(http, 2.0, concurrency)  # warm-up
            return await _profiled(stack.proc.pid, lambda: _throughput(http, seconds + 1.0, concurrency), seconds, gil)
    finally:
        await asyncio.to_thread(stack.stop)


async def _upstream_load(seconds: float, concurrency: int, gil: bool, token_gap_ms: float = 0.0,
                         max_tokens: int = 8) -> tuple[dict, float]:
    from loadgen.live.peer_bench import Client, Sides, _rate

    state = Path(tempfile.mkdtemp(prefix="autellix-profile-", dir="/tmp"))
    sides = Sides("stub", state, token_gap_ms)
    try:
        await asyncio.to_thread(sides.start, 300.0)
        async with Client({"mesh": sides.urls["mesh"]}, concurrency, max_tokens) as client:
            await _rate(client, "mesh", 2.0, concurrency)  # warm-up

            async def load() -> float:
                return (await _rate(client, "mesh", seconds + 1.0, concurrency))[0]
            return await _profiled(sides.procs["mesh"].pid, load, seconds, gil)
    finally:
        await asyncio.to_thread(sides.stop)
        shutil.rmtree(state, ignore_errors=True)


async def _profiled(root_pid: int, load, seconds: float, gil: bool) -> tuple[dict, float]:
    out_dir = Path(tempfile.mkdtemp(prefix="autellix-pyspy-", dir="/tmp"))
    try:
        pids = service_pids(root_pid)
        spies = record(pids, seconds, 50, out_dir, gil)
        rate = await load()
        profiles = {}
        for role, spy in spies.items():
            _, err = await asyncio.to_thread(spy.communicate)
            path = out_dir / f"{role}.txt"
            profiles[role] = (top_frames(path.read_text()) if path.exists()
                              else {"error": f"py-spy gave no profile: {err.strip()[-300:]}"})
        return profiles, rate
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.profile_mesh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--path", choices=("lite", "upstream"), default="lite")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--port", type=int, default=8198, help="the API's port (path lite)")
    p.add_argument("--gil", action="store_true",
                   help="only samples holding the GIL: Python running, not a thread waiting in a syscall or for a core")
    p.add_argument("--token-gap-ms", type=float, default=0.0,
                   help="path upstream: the stub streams one event per this many ms (0: a stream in one write)")
    p.add_argument("--max-tokens", type=int, default=8, help="path upstream: tokens per streamed call")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    t0 = time.time()
    if args.path == "lite":
        profiles, rate = asyncio.run(_lite_load(args.seconds, args.concurrency, args.port, args.gil))
    else:
        profiles, rate = asyncio.run(_upstream_load(args.seconds, args.concurrency, args.gil, args.token_gap_ms,
                                                    args.max_tokens))
    result = {"command": "python -m loadgen.bench.profile_mesh " + " ".join(argv if argv is not None else sys.argv[1:]),
              "path": args.path, "seconds": args.seconds, "concurrency": args.concurrency,
              "calls_per_s_while_sampled": rate,
              "sampling": "py-spy 0.4.3 record --rate 50 --nonblocking" + (" --gil" if args.gil else ""),
              "started_at_unix": int(t0), "profiles": profiles}
    write_json(args.json, result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
