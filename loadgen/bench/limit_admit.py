"""What a call waits for its tenant's admission, with and without grants ahead, same run.

    python -m loadgen.bench.limit_admit [--calls 300] [--repeats 3] [--json PATH]

One NATS server, the limit owner (`services/process_table/tenant_limits.py`) in a process of its
own, as in the mesh, and two API-side limiters (`services/session_api/shared_limits.py`): one
with LIMIT_GRANTS_AHEAD=0 (every call asks the owner: a round trip on the call's path) and one at
the default. Calls alternate between them one at a time (admit, then release), then in bursts of
`--burst` at once; reported: admit latency percentiles per side and the ratio, per repeat, then
min / median / max and the spread over repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen.bench.spread import ratio, summarize_runs
from loadgen.results_json import write_json
from shared.stats import percentile

SIDES = {"ask_each_call": 0, "grants_ahead": None}  # None: the setting's default


async def _owner(nats_url: str) -> None:
    from services.process_table.tenant_limits import TenantLimitOwner
    from shared.bus.bus import Bus

    bus = await Bus.connect(nats_url, "process_table")
    await TenantLimitOwner(bus).start()
    print("owner ready", flush=True)
    await asyncio.Event().wait()


async def _limiter(nats_url: str, ahead: int | None):
    from services.session_api.settings import SessionApiSettings
    from services.session_api.shared_limits import SharedCallLimiter
    from shared.bus.bus import Bus

    bus = await Bus.connect(nats_url, "session_api")
    settings = SessionApiSettings(nats_url=nats_url, **({} if ahead is None else {"limit_grants_ahead": ahead}))
    return bus, await SharedCallLimiter(bus, settings).start()


async def _timed_admit(limiter, tenant: str) -> float:
    t0 = time.perf_counter()
    await limiter.admit(tenant, None)
    return time.perf_counter() - t0


def _ms(values: list[float]) -> dict:
    return {"p50_ms": percentile(values, 50) * 1e3, "p99_ms": percentile(values, 99) * 1e3}


async def _repeat(limiters: dict, calls: int, burst: int) -> dict:
    one: dict[str, list[float]] = {side: [] for side in limiters}
    bursts: dict[str, list[float]] = {side: [] for side in limiters}
    for i in range(calls):
        for side in (list(limiters) if i % 2 == 0 else list(limiters)[::-1]):
            one[side].append(await _timed_admit(limiters[side], side))
            limiters[side].release(side, None)
    for i in range(max(calls // burst, 1)):
        for side in (list(limiters) if i % 2 == 0 else list(limiters)[::-1]):
            bursts[side] += await asyncio.gather(*(_timed_admit(limiters[side], side) for _ in range(burst)))
            for _ in range(burst):
                limiters[side].release(side, None)
    out = {}
    for label, samples in (("one_at_a_time", one), (f"bursts_of_{burst}", bursts)):
        got = {side: _ms(v) for side, v in samples.items()}
        out[label] = got | {"grants_over_ask": {k: ratio(got["grants_ahead"][k], got["ask_each_call"][k])
                                                for k in ("p50_ms", "p99_ms")}}
    return out


async def measure(nats_url: str, calls: int, burst: int, repeats: int) -> dict:
    made = {side: await _limiter(nats_url, ahead) for side, ahead in SIDES.items()}
    limiters = {side: limiter for side, (_, limiter) in made.items()}
    try:
        for side, limiter in limiters.items():  # warm-up: connections, the owner's first batch
            for _ in range(20):
                await limiter.admit(side, None)
                limiter.release(side, None)
        runs = [await _repeat(limiters, calls, burst) for _ in range(repeats)]
    finally:
        for bus, limiter in made.values():
            await limiter.close()
            await bus.close()
    return {"summary": summarize_runs(runs), "runs": runs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.limit_admit", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--burst", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--serve-owner", metavar="NATS_URL", help=argparse.SUPPRESS)  # the owner's own process
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.serve_owner:
        asyncio.run(_owner(args.serve_owner))
        return 0
    if args.calls < 1 or args.burst < 1 or args.repeats < 1:
        p.error("--calls, --burst and --repeats must be >= 1")
    from runtime.nats_server import NatsServer

    nats = NatsServer(Path(tempfile.mkdtemp(prefix="autellix-limits-")) / "nats").start()
    owner = subprocess.Popen([sys.executable, "-m", "loadgen.bench.limit_admit", "--serve-owner", nats.url],
                             stdout=subprocess.PIPE, text=True)
    try:
        for line in owner.stdout or ():  # its log lines come first
            if "owner ready" in line:
                break
        else:
            raise RuntimeError("the limit owner did not start")
        result = asyncio.run(measure(nats.url, args.calls, args.burst, args.repeats))
    finally:
        owner.terminate()
        owner.wait(10)
        nats.stop()
    result = {"benchmark": "admission latency: every call asks the limit owner vs grants held ahead, same run",
              "command": "python -m loadgen.bench.limit_admit " + " ".join(argv if argv is not None else sys.argv[1:]),
              "calls": args.calls, "burst": args.burst, "repeats": args.repeats, "cpu_count": os.cpu_count(),
              "load_average_1m": round(os.getloadavg()[0], 2), **result}
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
