"""`autellix bench-engine`: simulated engine steps per wall second of the lite engine model.

    autellix bench-engine [--running 64] [--steps 100000] [--policy plas] [--json PATH]

Scenarios (each run `--repeats` times; the median is reported):
- decode: `--running` calls in decode steady state (512-token prompts, outputs long enough that
  none finishes in the window): the Speed target of issue 2;
- churn: `--running` closed-loop clients; a finished call (512 in, 256 out) is replaced at once, so
  prefill chunks, finishes and completions are in the window;
- queued: twice as many closed-loop clients as `max_num_seqs = --running`, so calls always wait
  (priority keys, preemption decisions and anti-starvation checks are exercised).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from shared.core.policy import SchedulingPolicy, parse_policy
from shared.engine.api import DictProgramDirectory, EngineCall
from shared.engine.lite import LiteEngine, LiteEngineConfig

PROMPT_TOKENS = 512
CHURN_OUTPUT_TOKENS = 256
DECODE_WINDOW_STEPS = 5_000
TARGET_STEPS_PER_S = 50_000  # issue 2, "Speed"


def register(subparsers) -> None:
    p = subparsers.add_parser("bench-engine", help="lite engine speed: simulated steps per wall second",
                              description=__doc__.splitlines()[0])
    p.add_argument("--running", type=int, default=64, help="running calls (default 64)")
    p.add_argument("--steps", type=int, default=100_000, help="measured steps per scenario run")
    p.add_argument("--policy", default="plas", help="fcfs, mlfq, plas, atlas or srpt (default plas)")
    p.add_argument("--preset", default="llama3.1-8b-a100")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", dest="json_path", default=None, help="write the results here")
    p.set_defaults(handler=run)


def run(args) -> int:
    if args.running < 1 or args.steps < 1 or args.repeats < 1:
        raise ValueError("--running, --steps and --repeats must be >= 1")
    policy = SchedulingPolicy(parse_policy(args.policy))
    LiteEngineConfig(preset=args.preset)  # validates the preset name
    scenarios = {}
    for name, fn in (("decode", _decode), ("churn", _churn), ("queued", _queued)):
        runs = [fn(policy, args.preset, args.running, args.steps) for _ in range(args.repeats)]
        rates = [r["steps_per_s"] for r in runs]
        cpu_rates = [r["steps_per_cpu_s"] for r in runs]
        scenarios[name] = {**runs[0], "steps_per_s": statistics.median(rates),
                           "steps_per_cpu_s": statistics.median(cpu_rates),
                           "steps_per_s_runs": [round(x) for x in rates]}
        print(f"{name:7s} running={runs[0]['mean_running']:.1f} waiting={runs[0]['mean_waiting']:.1f} "
              f"steps per wall s: median {statistics.median(rates):,.0f} {[round(x) for x in rates]}; "
              f"per CPU s: {statistics.median(cpu_rates):,.0f}")
    result = {
        "command": "autellix " + " ".join(sys.argv[1:]) if sys.argv[1:] else "autellix bench-engine",
        "engine": "lite", "policy": policy.name.value, "preset": args.preset, "running": args.running,
        "target_steps_per_s": TARGET_STEPS_PER_S,
        "meets_target": scenarios["decode"]["steps_per_s"] >= TARGET_STEPS_PER_S,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "load_average_1m_at_end": os.getloadavg()[0]},
        "scenarios": scenarios,
    }
    if args.json_path:
        path = Path(args.json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


class _Loop:
    """A closed-loop driver: `clients` programs, each resubmitting a call when its last one ends."""

    def __init__(self, policy: SchedulingPolicy, preset: str, max_num_seqs: int, clients: int,
                 output_tokens: int) -> None:
        self.directory = DictProgramDirectory()
        self.engine = LiteEngine("bench", policy, self.directory,
                                 LiteEngineConfig(preset=preset, max_num_seqs=max_num_seqs))
        self.aggregation = policy.aggregation
        self.output_tokens = output_tokens
        self.now = 0.0
        self.seq = 0
        for client in range(clients):
            self._submit(client)

    def _submit(self, client: int) -> None:
        cid = f"c{client}/{self.seq}"
        call = EngineCall(cid, f"c{client}", "main", ((cid, PROMPT_TOKENS),), self.output_tokens,
                          self.now, self.now, self.seq)
        self.seq += 1
        self.engine.submit(call, self.now)

    def run(self, steps: int, resubmit: bool) -> tuple[float, float]:
        engine, running, waiting = self.engine, 0, 0
        for _ in range(steps):
            report = engine.step(self.now)
            self.now += report.duration_s
            running += report.num_running
            waiting += report.num_waiting
            for done in report.finished:
                self.directory.ledger(done.program_id).complete_call(
                    done.call_id, done.thread_id, done.service_s, done.wait_s,
                    done.thread_service_at_submit_s, self.aggregation, done.submit_epoch)
                if resubmit:
                    self._submit(int(done.program_id[1:]))
        return running / steps, waiting / steps


def _measure(loop: _Loop, steps: int, resubmit: bool) -> dict:
    start, cpu_start = time.perf_counter(), time.process_time()
    mean_running, mean_waiting = loop.run(steps, resubmit)
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    return {"steps": steps, "wall_s": round(wall_s, 4), "cpu_s": round(cpu_s, 4), "steps_per_s": steps / wall_s,
            "steps_per_cpu_s": steps / max(cpu_s, 1e-9), "mean_running": mean_running,
            "mean_waiting": mean_waiting, "simulated_s": round(loop.now, 3)}


def _decode(policy: SchedulingPolicy, preset: str, running: int, steps: int) -> dict:
    """Windows of decode-only steps: KV holds 64 x (512 + ~5,000) tokens, so the engine is rebuilt
    (untimed) between windows until `steps` decode steps are measured. No call finishes or is
    preempted inside a window."""
    warmup = 20
    kv_tokens = LiteEngine("probe", policy, DictProgramDirectory(), LiteEngineConfig(preset=preset)).num_blocks * 16
    fit = kv_tokens // running - PROMPT_TOKENS - warmup - 64  # every call's whole context stays in KV
    if fit < 100:
        raise ValueError(f"{running} running calls of {PROMPT_TOKENS}-token prompts do not fit the KV cache")
    window = min(steps, DECODE_WINDOW_STEPS, fit)
    measured, wall_s, cpu_s, running_sum, now = 0, 0.0, 0.0, 0.0, 0.0
    while measured < steps:
        n = min(window, steps - measured)
        loop = _Loop(policy, preset, running, running, output_tokens=n + warmup + 2)
        loop.run(warmup, resubmit=False)  # prefills done: every call decodes from here on
        start, cpu_start = time.perf_counter(), time.process_time()
        mean_running, _ = loop.run(n, resubmit=False)
        wall_s += time.perf_counter() - start
        cpu_s += time.process_time() - cpu_start
        measured += n
        running_sum += mean_running * n
        now += loop.now
    return {"steps": measured, "wall_s": round(wall_s, 4), "cpu_s": round(cpu_s, 4),
            "steps_per_s": measured / wall_s, "steps_per_cpu_s": measured / max(cpu_s, 1e-9),
            "mean_running": running_sum / measured, "mean_waiting": 0.0, "simulated_s": round(now, 3)}


def _churn(policy: SchedulingPolicy, preset: str, running: int, steps: int) -> dict:
    loop = _Loop(policy, preset, running, running, output_tokens=CHURN_OUTPUT_TOKENS)
    loop.run(CHURN_OUTPUT_TOKENS * 2, resubmit=True)
    return _measure(loop, steps, resubmit=True)


def _queued(policy: SchedulingPolicy, preset: str, running: int, steps: int) -> dict:
    loop = _Loop(policy, preset, running, 2 * running, output_tokens=CHURN_OUTPUT_TOKENS)
    loop.run(CHURN_OUTPUT_TOKENS * 2, resubmit=True)
    return _measure(loop, steps, resubmit=True)
