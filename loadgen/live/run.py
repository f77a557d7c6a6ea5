"""One live experiment: for each rate, the workload's programs with Poisson arrivals, run against
the API, summarised as a simulator-shaped point."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import TextIO

from loadgen.live.driver import LiveDriver, LiveProgress
from loadgen.live.report import live_result, point_summary
from loadgen.results_json import finite
from loadgen.workloads.arrivals import poisson_arrivals
from loadgen.workloads.registry import make_programs
from loadgen.workloads.spec import ProgramSpec


@dataclass(frozen=True)
class LiveRunConfig:
    url: str
    api_key: str
    workload: str
    rates: list[float]
    duration_s: float | None = None  # arrivals within this window, or
    num_programs: int | None = None  # exactly this many programs
    seed: int = 0
    tool_delays: bool = False
    drain_timeout_s: float = 300.0
    policy_label: str = "live"
    model: str = "autellix-lite"
    tool_hints: bool = False  # send X-Next-Tool (issue 6)
    size_hints: bool = False  # send X-Remaining-Calls: the program's unfinished calls


def programs_for(config: LiveRunConfig, rate: float) -> list[ProgramSpec]:
    """The same programs and arrival times as `autellix sim` uses for (workload, rate, n, seed)."""
    if config.num_programs is not None:
        n = config.num_programs
        arrivals = poisson_arrivals(rate, n, config.seed)
    else:
        # enough arrivals to cover the window, then keep those inside it (at least one)
        n_max = max(1, math.ceil(rate * config.duration_s * 1.5 + 10))
        arrivals = [t for t in poisson_arrivals(rate, n_max, config.seed) if t <= config.duration_s] or \
            poisson_arrivals(rate, 1, config.seed)
        n = len(arrivals)
    opts = {"tool_delays": True} if config.tool_delays else {}
    programs = make_programs(config.workload, n, config.seed, **opts)
    return [dataclasses.replace(p, arrival_s=t) for p, t in zip(programs, arrivals, strict=True)]


def _progress_printer(out: TextIO, rate: float, total: int):
    tty = out.isatty()

    def tick(p: LiveProgress, now_s: float) -> None:
        width = 24
        filled = int(width * (p.finished + p.failed) / max(total, 1))
        bar = "#" * filled + "-" * (width - filled)
        line = (f"rate {rate:g}/s [{bar}] {now_s:6.1f}s arrived {p.arrived}/{total} done {p.finished} "
                f"failed {p.failed} calls in flight {p.calls_in_flight} done {p.calls_done} tokens {p.tokens}")
        out.write(("\r" + line) if tty else (line + "\n"))
        out.flush()
    return tick


async def run_live(config: LiveRunConfig, progress: TextIO | None = None) -> dict:
    points = []
    for rate in config.rates:
        programs = programs_for(config, rate)
        driver = LiveDriver(config.url, config.api_key, config.model, tool_hints=config.tool_hints,
                            size_hints=config.size_hints)
        tick = _progress_printer(progress, rate, len(programs)) if progress else None
        t0 = time.perf_counter()
        try:
            records = await driver.run(programs, tick, config.drain_timeout_s)
        finally:
            await driver.close()
        if progress:
            progress.write("\n")
            for err in driver.progress.errors[:5]:
                progress.write(f"  error: {err}\n")
        points.append(point_summary(rate, records, time.perf_counter() - t0))
    return finite(live_result(config.workload, config.seed, config.policy_label, points, config.url,
                              {"num_programs": config.num_programs, "duration_s": config.duration_s,
                               "tool_delays": config.tool_delays, "tool_hints": config.tool_hints,
                               "size_hints": config.size_hints}))
