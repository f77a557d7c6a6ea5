"""Where tracing, metrics and logging spend each service's CPU on the mesh: py-spy on every service
of one `autellix up` (a variant of `loadgen.bench.tracing_cost`) while the mesh bench's load runs,
then per service the share of busy samples under OpenTelemetry, prometheus_client and structlog
frames, and which of our lines the OpenTelemetry time is spent under.

    python -m loadgen.bench.tracing_profile --variant traced_all|traced_10pct|access_log|off [--seconds 20] [--json PATH]

Samples hold the GIL (`--gil`: Python running, not a thread waiting), at 100 Hz, without pausing
the processes; sampling costs CPU, so the calls/s while sampled is for context only.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from loadgen.bench.profile_mesh import collapsed_stacks, py_spy_binary, service_pids
from loadgen.bench.tracing_cost import STACK_ENV, Sink, variants
from loadgen.live.mesh_bench import LeanHttp, _throughput
from loadgen.live.real_servers import report
from loadgen.live.stack_process import start_stack
from runtime.ports import free_port

LIBRARIES = {"opentelemetry": "/opentelemetry/", "prometheus_client": "/prometheus_client/", "structlog": "/structlog/"}
TOP = 10


def _short(frame: str) -> str:
    """A frame with its file relative to the checkout or to site-packages."""
    name, _, where = frame.partition(" (")
    for cut in ("site-packages/", str(Path.cwd()) + "/"):
        if cut in where:
            where = where.split(cut, 1)[1]
    return f"{name} ({where}"


def library_shares(raw: str) -> dict:
    """From py-spy's raw output (full file names): busy samples, each library's inclusive share,
    and the frames just outside OpenTelemetry (the callers its time is spent under)."""
    total = 0
    under: Counter[str] = Counter()
    callers: Counter[str] = Counter()
    for frames, n in collapsed_stacks(raw):
        total += n
        for lib, marker in LIBRARIES.items():
            if any(marker in f for f in frames):
                under[lib] += n
        first = next((i for i, f in enumerate(frames) if LIBRARIES["opentelemetry"] in f), None)
        if first is not None:
            callers[_short(frames[first - 1]) if first else "(thread root)"] += n
    share = {lib: round(under[lib] / max(total, 1), 4) for lib in LIBRARIES}
    return {"busy_samples": total, "share": share,
            "opentelemetry_under": [{"frame": f, "share": round(c / max(total, 1), 4)}
                                    for f, c in callers.most_common(TOP)]}


async def profile(variant: str, seconds: float, concurrency: int) -> dict:
    sink = Sink()
    out_dir = Path(tempfile.mkdtemp(prefix="autellix-tracing-profile-", dir="/tmp"))
    stack = None
    try:
        env = {**STACK_ENV, **variants(sink.url)[variant]}
        stack = await asyncio.to_thread(start_stack, "atlas", 1, free_port(), "lite", 120.0, None, env)
        async with LeanHttp(stack.url, stack.api_key, concurrency) as http:
            await _throughput(http, 2.0, concurrency)  # warm-up
            spies = {role: subprocess.Popen(
                [py_spy_binary(), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "100",
                 "--nonblocking", "--gil", "--full-filenames", "--format", "raw", "--output", str(out_dir / role)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for role, pid in service_pids(stack.proc.pid).items()}
            rate = await _throughput(http, seconds + 1.0, concurrency)
        for spy in spies.values():
            await asyncio.to_thread(spy.wait)
        return {"variant": variant, "calls_per_s_while_sampled": round(rate, 1),
                "services": {role: library_shares((out_dir / role).read_text()) if (out_dir / role).exists()
                             else {"error": "py-spy gave no profile"} for role in spies}}
    finally:
        if stack is not None:
            await asyncio.to_thread(stack.stop)
        sink.stop()
        for f in out_dir.glob("*"):
            f.unlink()
        out_dir.rmdir()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.tracing_profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", choices=tuple(variants("")), default="traced_all")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    result = asyncio.run(profile(args.variant, args.seconds, args.concurrency))
    return report(result, args.json, "python -m loadgen.bench.tracing_profile", argv)


if __name__ == "__main__":
    raise SystemExit(main())
