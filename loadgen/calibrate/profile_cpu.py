"""Profile the real vLLM CPU engine on the tiny model: every engine-core step timed with what it ran.

`python -m loadgen.calibrate.profile_cpu --json docs/results/tiny_cpu_profile.json`

The engine is the one `autellix up --backend vllm --model tiny` serves (same model folder and
flags: dummy weights, eager mode, a 256 MiB KV cache, vLLM's CPU defaults for the token budget).
`--engine-core child` (default) runs its engine core in a child process, as live, with vLLM's own
scheduler subclassed only to log each step (`vllm_cpu.StepTimingScheduler`); `inprocess` runs the
core in this process and times its steps from outside (the first profile was taken that way, and
its steps were 10x slower than the live engine's on the same loaded machine). Scenarios, each repeated:
- prefill: one prompt of n tokens (a whole chunk, context n);
- prefill on a cached prefix: a prompt of P tokens, then the same P plus n more (chunk n at context P + n);
- decode: B prompts of C tokens, then steps where all B decode (context B x C summed);
- mixed: decoders running while a new prompt's chunk joins their steps.
Every step's record (duration, tokens, decode contexts, prefill chunks) is kept; `fit_cpu` fits them.
`--placement engine-alone` profiles the engine core beside its worker, as `live_vs_sim --placement
engine-alone` runs it live. The worker's core is probed before and after (`core_speed`).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Protocol

from loadgen.calibrate import core_speed
from runtime import cpu_placement
from shared.engine.tiny_model import make_tiny_model

# the same flags as TINY_MODEL_VLLM_ARGS (services/engine_agent/vllm_main.py), as engine kwargs
TINY_ENGINE_KWARGS = {"load_format": "dummy", "enforce_eager": True, "kv_cache_memory_bytes": 256 << 20,
                      "max_model_len": 131072, "seed": 0}
PREFILL_SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048, 3072, 4096)
CACHED = ((1024, 128), (1024, 1024), (4096, 128), (4096, 1024), (16384, 128), (16384, 1024))
DECODE = ((1, 64), (2, 64), (4, 64), (8, 64), (16, 64), (1, 1024), (2, 1024), (4, 1024), (8, 1024),
          (1, 4096), (2, 4096), (4, 4096), (1, 16384), (2, 16384))
DECODE_STEPS = 8
MIXED = ((4, 1024, 512), (8, 256, 1024), (2, 4096, 2048))  # (decoders, their context, new prompt)


class ProfiledEngine(Protocol):
    """What both timed engines (`vllm_cpu.TimedEngine`, `ChildProcessTimedEngine`) offer."""

    def add(self, request_id: str, token_ids: list[int], max_tokens: int) -> None: ...
    def step(self) -> None: ...
    def busy(self) -> bool: ...
    def decoding(self) -> int: ...
    def steps_logged(self) -> list[dict]: ...


class Profiler:
    def __init__(self, engine: ProfiledEngine, seed: int) -> None:
        self.engine = engine
        self.rng = random.Random(seed)
        self.n = 0
        self.scenario = ""
        self.marks: list[tuple[float, str]] = []

    def tokens(self, n: int) -> list[int]:
        return [self.rng.randrange(3, 500) for _ in range(n)]  # fresh tokens: no prefix-cache hit

    def rid(self) -> str:
        self.n += 1
        return f"{self.scenario}-{self.n}"

    def drain(self) -> None:
        while self.engine.busy():
            self._step()

    def _step(self) -> None:
        self.engine.step()

    def mark(self, scenario: str) -> None:
        self.scenario = scenario
        self.marks.append((time.monotonic(), scenario))

    def labelled_steps(self) -> list[dict]:
        """Every step with the scenario running when it ended (the log's clock is the same monotonic clock)."""
        steps = self.engine.steps_logged()
        starts = [t for t, _ in self.marks]
        out = []
        for s in steps:
            end = s.get("end_s")
            i = bisect.bisect_right(starts, end) - 1 if end is not None else None
            out.append({**s, "scenario": self.marks[i][1] if i is not None and i >= 0 else s.get("scenario", "")})
        return out

    def prefill(self, n: int) -> None:
        self.engine.add(self.rid(), self.tokens(n), 1)
        self.drain()

    def cached(self, prior: int, n: int) -> None:
        base = self.tokens(prior)
        self.engine.add(self.rid(), base, 1)
        self.drain()
        self.engine.add(self.rid(), base + self.tokens(n), 1)
        self.drain()

    def decode(self, batch: int, ctx: int, steps: int = DECODE_STEPS) -> None:
        """B prompts of C tokens; once all decode, `steps` more steps (then they finish)."""
        self.start_decoders(batch, ctx, steps)
        self.drain()

    def start_decoders(self, batch: int, ctx: int, steps: int) -> None:
        for _ in range(batch):
            self.engine.add(self.rid(), self.tokens(ctx), steps + 4)
        while self.engine.decoding() < batch:
            self._step()

    def mixed(self, batch: int, ctx: int, new: int) -> None:
        self.start_decoders(batch, ctx, 64)
        self.engine.add(self.rid(), self.tokens(new), 1)
        self.drain()


def run_profile(reps: int, seed: int, engine_core: str = "child", note: str = "", placement: str = "float") -> dict:
    from shared.engine import vllm_cpu  # imports vLLM

    folder = make_tiny_model(os.environ.get("ENGINE_TINY_MODEL_DIR", "/tmp/autellix-tiny-model"))
    t0 = time.time()
    if engine_core == "child":
        fd, log = tempfile.mkstemp(prefix="autellix-steps-", suffix=".jsonl")
        os.close(fd)
        engine = vllm_cpu.ChildProcessTimedEngine(str(folder), log, **TINY_ENGINE_KWARGS)
    else:
        engine = vllm_cpu.TimedEngine(str(folder), **TINY_ENGINE_KWARGS)
    # the live stack's placement (`live_vs_sim --placement`), so the profile times the steps the
    # way they run there: under `engine-alone` the engine core takes turns with its worker on one core
    placed = cpu_placement.place(placement, (os.getpid(),))
    worker_cpu = min(cpu_placement.worker_cpus(os.getpid()) or {0})
    speed_before = core_speed.probe(worker_cpu)
    prof = Profiler(engine, seed)
    load_before = os.getloadavg()
    prof.mark("warmup")
    for n in (16, 512, 4096):
        prof.prefill(n)
    prof.decode(4, 256)
    for _ in range(reps):
        prof.mark("prefill")
        for n in PREFILL_SIZES:
            prof.prefill(n)
        prof.mark("cached")
        for prior, n in CACHED:
            prof.cached(prior, n)
        prof.mark("decode")
        for batch, ctx in DECODE:
            prof.decode(batch, ctx)
        prof.mark("mixed")
        for batch, ctx, new in MIXED:
            prof.mixed(batch, ctx, new)
    speed = core_speed.around(speed_before, core_speed.probe(worker_cpu))
    steps = [s for s in prof.labelled_steps() if s["scenario"] != "warmup"]
    cpu_placement.pin_threads(os.getpid(), cpu_placement.every_cpu())  # the caller's process, unpinned again
    return {
        "what": "vLLM CPU engine core steps on the tiny model (autellix up --backend vllm --model tiny)",
        "engine_kwargs": {k: v for k, v in TINY_ENGINE_KWARGS.items()},
        "engine_core": engine_core,
        "cpu_placement": placed,
        "core_speed": speed,  # the worker's core, probed before and after (loadgen/calibrate/core_speed.py)
        # vLLM's CPU defaults for this model, as the engine logged them (and the in-process run read them)
        "block_size": 128, "num_kv_blocks": 2048, "max_num_batched_tokens": 4096, "max_num_seqs": 256,
        "prefix_caching": True,
        "reps": reps, "seed": seed,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                 "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                 "note": note or None},
        "wall_s": round(time.time() - t0, 1),
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", dest="json_path", required=True)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engine-core", choices=("child", "inprocess"), default="child")
    p.add_argument("--placement", choices=cpu_placement.PLACEMENTS, default="float",
                   help="where the engine core runs, as `live_vs_sim --placement` puts it live (child engine core only)")
    p.add_argument("--note", default="", help="what to record about the host (e.g. what else ran on it)")
    args = p.parse_args(argv)
    if args.placement != "float" and args.engine_core != "child":
        p.error("--placement needs --engine-core child: in process, the engine core is this driver")
    result = run_profile(args.reps, args.seed, args.engine_core, args.note, args.placement)
    result["command"] = "python -m loadgen.calibrate.profile_cpu " + " ".join(argv if argv is not None else
                                                                                sys.argv[1:])
    Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json_path).write_text(json.dumps(result, indent=None, separators=(",", ":")) + "\n")
    print(f"{len(result['steps'])} steps in {result['wall_s']} s -> {args.json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
