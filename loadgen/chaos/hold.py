"""Load held: measure the stack's capacity (calls/s, closed loop, concurrency ramped until the
throughput stops growing), then hold an open-loop Poisson arrival of calls at a fraction of it
(default 80%) for N minutes, reporting errors, latency and each process's RSS per minute.

Both phases send the same calls: one-call programs (no session), each prompt unique. (The probe
used to run the chaos workload's session programs, with repeated prefixes and, since the chaos
workload forks, two calls of a program in flight at once: another workload than the one held.
On the same code the two probes measured about the same, 92.9 and 90.9 calls/s.)"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass

from loadgen.chaos.stack import ChaosStack
from loadgen.live.lean_http import ERRORS, LeanHttpPool
from shared.stats import percentile


@dataclass
class HoldPlan:
    minutes: float = 10.0
    fraction: float = 0.8
    measure_step_s: float = 10.0
    concurrency_steps: tuple[int, ...] = (16, 32, 64, 128, 256)  # up to max_in_flight
    max_tokens: int = 24
    prompt_chars: int = 400
    seed: int = 0
    # calls in flight at most (one connection each): past it, arrivals wait for a slot (counted as
    # late). The client is the lean pool (loadgen/live/lean_http.py): with httpx, 256 requests in
    # its pool made the client crawl while the stack idled (engines empty, API at 9% of a core)
    max_in_flight: int = 256


def _payload(plan: HoldPlan, n: int) -> dict:
    """The n-th call: a one-call program with a prompt no other call repeats."""
    return {"model": "autellix-lite", "max_tokens": plan.max_tokens,
            "messages": [{"role": "user", "content": f"{n} " + "x" * plan.prompt_chars}]}


async def _closed_loop(stack: ChaosStack, plan: HoldPlan, concurrency: int, first_n: int) -> tuple[int, int, float]:
    """`concurrency` clients sending one call after another for one step: (completed, errors, s)."""
    keys = list(stack.tenant_keys.values())
    counts = {"completed": 0, "errors": 0, "n": first_n}
    t0 = time.monotonic()
    stop_at = t0 + plan.measure_step_s

    async def client(http: LeanHttpPool) -> None:
        while time.monotonic() < stop_at:
            counts["n"] += 1
            n = counts["n"]
            try:
                status, _ = await http.post_json("/v1/chat/completions", _payload(plan, n),
                                                 {"Authorization": f"Bearer {keys[n % len(keys)]}"})
                counts["completed" if status == 200 else "errors"] += 1
            except ERRORS:
                counts["errors"] += 1

    async with LeanHttpPool(stack.api_url, concurrency) as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    return counts["completed"], counts["errors"], time.monotonic() - t0


async def measure_capacity(stack: ChaosStack, plan: HoldPlan, say) -> tuple[float, list[dict]]:
    steps: list[dict] = []
    best = 0.0
    for k, concurrency in enumerate(plan.concurrency_steps):
        completed, errors, elapsed_s = await _closed_loop(stack, plan, concurrency, first_n=-(k + 1) * 10_000_000)
        rate = completed / elapsed_s
        steps.append({"concurrency": concurrency, "calls_per_s": round(rate, 1), "errors": errors})
        say(f"capacity step: concurrency {concurrency} -> {rate:.1f} calls/s")
        if rate < best * 1.1:
            best = max(best, rate)
            break
        best = max(best, rate)
    return best, steps


async def hold(stack: ChaosStack, plan: HoldPlan, rate_per_s: float, say) -> dict:
    rng = random.Random(plan.seed)
    keys = list(stack.tenant_keys.values())
    latencies: list[float] = []
    outcomes = {"completed": 0, "errors": 0, "submitted": 0, "late": 0}  # late: waited for a slot
    slots = asyncio.Semaphore(plan.max_in_flight)
    late_s = 0.0
    error_codes: dict[str, int] = {}
    minutes: list[dict] = []
    tasks: set[asyncio.Task] = set()

    async def one(http: LeanHttpPool, n: int) -> None:
        t0 = time.monotonic()
        headers = {"Authorization": f"Bearer {keys[n % len(keys)]}"}
        try:
            status, _ = await asyncio.wait_for(http.post_json("/v1/chat/completions", _payload(plan, n), headers),
                                               60.0)
            ok = status == 200
            code = str(status)
        except (*ERRORS, TimeoutError) as exc:
            ok, code = False, type(exc).__name__
        finally:
            slots.release()
        if ok:
            outcomes["completed"] += 1
            latencies.append(time.monotonic() - t0)
        else:
            outcomes["errors"] += 1
            error_codes[code] = error_codes.get(code, 0) + 1

    rss_start = stack.rss_mib()
    load_start = round(os.getloadavg()[0], 2)
    t_start = time.monotonic()
    end = t_start + plan.minutes * 60.0
    next_minute = t_start + 60.0
    n = 0
    async with LeanHttpPool(stack.api_url, plan.max_in_flight) as http:
        next_at = t_start
        while time.monotonic() < end:
            next_at += rng.expovariate(rate_per_s)
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if slots.locked():
                outcomes["late"] += 1
                t_wait = time.monotonic()
                await slots.acquire()
                late_s += time.monotonic() - t_wait
            else:
                await slots.acquire()
            n += 1
            outcomes["submitted"] += 1
            task = asyncio.create_task(one(http, n))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            if time.monotonic() >= next_minute:
                recent = latencies[-2000:]
                minutes.append({"minute": len(minutes) + 1, **outcomes, "in_flight": len(tasks),
                                "p50_s": round(percentile(recent, 50), 3) if recent else None,
                                "p99_s": round(percentile(recent, 99), 3) if recent else None,
                                "rss_mib": stack.rss_mib(),
                                "load_avg_1m": round(os.getloadavg()[0], 2)})  # the machine is shared
                say(f"minute {len(minutes)}: {outcomes}, in flight {len(tasks)}")
                next_minute += 60.0
        if tasks:
            await asyncio.wait(set(tasks), timeout=120)
    elapsed = time.monotonic() - t_start
    return {
        "rate_per_s": round(rate_per_s, 2),
        "achieved_calls_per_s": round(outcomes["completed"] / elapsed, 2),
        "duration_s": round(elapsed, 1),
        **outcomes,
        "late_wait_s": round(late_s, 1),  # total time arrivals waited for a slot (0: the stack kept up)
        "max_in_flight": plan.max_in_flight,
        "error_codes": error_codes,
        "latency_s": {"p50": round(percentile(latencies, 50), 3) if latencies else None,
                      "p99": round(percentile(latencies, 99), 3) if latencies else None},
        "rss_mib": {"start": rss_start, "end": stack.rss_mib()},
        "load_avg_1m": {"start": load_start, "end": round(os.getloadavg()[0], 2)},
        "minutes": minutes,
    }


async def hold_load(plan: HoldPlan, engines: int = 2, progress=None) -> dict:
    say = progress or (lambda _: None)
    if not 0 < plan.fraction <= 1.5 or not 0 < plan.minutes <= 24 * 60:
        raise ValueError("--fraction must be in (0, 1.5] and --minutes in (0, 1440]")
    stack = await ChaosStack(engines=engines).up()
    try:
        capacity, steps = await measure_capacity(stack, plan, say)
        say(f"capacity {capacity:.1f} calls/s; holding {plan.fraction:.0%} for {plan.minutes:g} min")
        held = await hold(stack, plan, capacity * plan.fraction, say)
    finally:
        stack.down()
    return {"capacity_calls_per_s": round(capacity, 1), "capacity_steps": steps, "fraction": plan.fraction,
            "engines": engines, "held": held}
