"""Where a live call's time goes outside the engine: client times beside the engine's own steps.

    python -m loadgen.calibrate.call_timeline burst --calls 10 --output-tokens 50 --placement engine-alone
    python -m loadgen.calibrate.call_timeline programs --workload mapreduce --rate 0.4 --placement engine-alone

A fresh `autellix up --backend vllm --model tiny` (FCFS, `--max-num-seqs 2`) logs every engine step
(ENGINE_STEP_LOG). `burst`: N streamed calls sent at once, each with its own prompt length, so its
prefill is found in the step log by its context; per call it prints when it was sent, when its
prefill ran in the engine, its first token and its end at the client (ms after the first send), and
each process's CPU seconds over the burst. `programs`: the live_vs_sim programs (token scale /4, no
warm-up), each program's span at the client beside its span in the simulator on a fit. A
diagnostic: nothing here is a benchmark figure on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from loadgen.calibrate.exact_prompts import segment_text
from loadgen.calibrate.live_vs_sim import wall_fit_cost
from loadgen.calibrate.real_driver import RealEngineDriver
from loadgen.calibrate.real_stack import start_real_stack
from loadgen.calibrate.scaled import shrink
from loadgen.calibrate.sim_side import RealEngineShape, simulate_records
from loadgen.live.process_cpu import cpu_s_by_name
from loadgen.live.run import LiveRunConfig, programs_for
from loadgen.live.stack_process import StackProcess
from loadgen.workloads.registry import WORKLOADS
from loadgen.workloads.spec import ProgramSpec
from runtime import cpu_placement

PRESET = "tiny-cpu"  # the simulator's preset; --fit replaces its four fitted terms


def process_cpu_s(stack: StackProcess) -> dict[str, float]:
    """CPU seconds (user + system) so far per process name, over the stack and this driver."""
    return cpu_s_by_name((*stack.process_roots(), os.getpid()))


async def _streamed(client, i: int, output_tokens: int) -> tuple[int, float, float, float]:
    messages = [{"role": "user", "content": segment_text(f"burst{i}-{time.time_ns()}", 300 + 17 * i)}]
    sent, first, usage = time.monotonic(), None, None
    stream = await client.chat.completions.create(
        model="tiny", messages=messages, max_tokens=output_tokens, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True, "temperature": 0.0},
        extra_headers={"X-Session-Id": f"burst{i}-{time.time_ns()}"})
    async for chunk in stream:
        usage = chunk.usage or usage
        if first is None and any(c.delta.content for c in chunk.choices):
            first = time.monotonic()
    return usage.prompt_tokens, sent, first, time.monotonic()


def burst(stack: StackProcess, log: Path, calls: int, output_tokens: int) -> dict:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=f"{stack.url}/v1", api_key=stack.api_key, max_retries=0)

    async def go():
        await _streamed(client, calls, output_tokens)  # one call first (its own length): the cold path
        await asyncio.sleep(1.0)
        before = process_cpu_s(stack)
        out = await asyncio.gather(*(_streamed(client, i, output_tokens) for i in range(calls)))
        after = process_cpu_s(stack)
        return out, {k: round(after.get(k, 0.0) - v, 3) for k, v in before.items()}

    results, cpu = asyncio.run(go())
    time.sleep(1.0)  # the step log's last lines
    steps = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    t0 = min(sent for _, sent, _, _ in results)
    rows = []
    for prompt, sent, first, end in sorted(results, key=lambda r: r[1]):
        prefill = next((s for s in steps if s["end_s"] > t0 and any(ctx == prompt for _, ctx in s["chunks"])), None)
        ms = lambda t: None if t is None else round((t - t0) * 1e3, 1)  # noqa: E731
        rows.append({"prompt_tokens": prompt, "sent_ms": ms(sent),
                     "prefill_start_ms": ms(prefill["end_s"] - prefill["duration_s"]) if prefill else None,
                     "prefill_end_ms": ms(prefill["end_s"]) if prefill else None,
                     "first_token_ms": ms(first), "end_ms": ms(end)})
    window = [s for s in steps if s["end_s"] >= t0]
    span = max(end for *_, end in results) - t0
    return {"calls": rows, "process_cpu_s": cpu, "span_s": round(span, 3),
            "engine_step_s": round(sum(s["duration_s"] for s in window), 3)}


def live_vs_sim_programs(workload: str, rate: float) -> list[ProgramSpec]:
    """live_vs_sim's programs: 16 of the workload at `rate`, seed 0, tokens / 4."""
    config = LiveRunConfig(url="", api_key="", workload=workload, rates=[rate], num_programs=16, seed=0, model="tiny")
    return shrink(programs_for(config, rate), 4)


def programs_run(stack: StackProcess, programs: list[ProgramSpec], fit: str | None) -> dict:
    async def go():
        driver = RealEngineDriver(stack.url, stack.api_key)
        try:
            return await driver.run(programs, None, 300.0)
        finally:
            await driver.close()

    records = asyncio.run(go())
    cutoff = max(p.arrival_s for p in programs) + 300.0
    cost = wall_fit_cost(fit, PRESET) if fit else None
    sim = {r.program_id: r.response_s
           for r in simulate_records(programs, "fcfs", PRESET, RealEngineShape(max_num_seqs=2), cutoff, cost)}
    return {"programs": [{"program_id": r.program_id, "live_s": round(r.response_s, 3) if r.ok else None,
                          "error": r.error, "sim_s": round(sim.get(r.program_id, float("nan")), 3)}
                         for r in records]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("burst", "programs"))
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--output-tokens", type=int, default=50)
    p.add_argument("--workload", default="mapreduce")
    p.add_argument("--rate", type=float, default=0.4)
    p.add_argument("--fit", default=None, help="programs: simulate on this fit_cpu JSON's terms")
    p.add_argument("--placement", choices=cpu_placement.PLACEMENTS, default="float")
    p.add_argument("--port", type=int, default=18700)
    p.add_argument("--json", dest="json_path")
    args = p.parse_args(argv)
    if args.calls < 1 or args.output_tokens < 1:
        p.error("--calls and --output-tokens must be >= 1")
    programs = None
    if args.mode == "programs":  # checked before a stack starts
        if args.workload not in WORKLOADS:
            p.error(f"unknown workload {args.workload!r}; valid workloads: {', '.join(sorted(WORKLOADS))}")
        if not args.rate > 0:
            p.error(f"--rate must be > 0 programs/s, got {args.rate:g}")
        if args.fit and not Path(args.fit).is_file():
            p.error(f"--fit {args.fit}: no such file")
        programs = live_vs_sim_programs(args.workload, args.rate)
    log = Path(tempfile.mkdtemp(prefix="autellix-timeline-")) / "steps.jsonl"
    stack = start_real_stack("fcfs", args.port, "--max-num-seqs 2", extra_env={"ENGINE_STEP_LOG": str(log)})
    try:
        placed = cpu_placement.place(args.placement, stack.process_roots(), also=(os.getpid(),))
        out = burst(stack, log, args.calls, args.output_tokens) if args.mode == "burst" else \
            programs_run(stack, programs, args.fit)
    finally:
        stack.stop()
    given = sys.argv[1:] if argv is None else argv
    result = {"mode": args.mode, "cpu_placement": placed, **out,
              "command": "python -m loadgen.calibrate.call_timeline " + " ".join(given)}
    text = json.dumps(result, indent=2)
    if args.json_path:
        Path(args.json_path).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
