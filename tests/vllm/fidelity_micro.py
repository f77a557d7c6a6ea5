"""Lite vs emulated on one small chained-program trace: the same calls through both engine models.

Run: `HF_HUB_OFFLINE=1 .venv/bin/python -m tests.vllm.fidelity_micro [num_programs [seed]]` (the test
`test_fidelity_micro.py` runs a smaller instance). Programs arrive by a Poisson process (1.2/s), each
a chain of 1-16 calls with a 2,000-token system prompt and its growing history; KV 6,000 blocks.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.vllm_emulated import EmulatedVllmEngine
from tests.engine.drive import Chain, drive

NUM_KV_BLOCKS = 6000


def chains(num_programs: int, seed: int = 1, rate_per_s: float = 1.2) -> list[Chain]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(num_programs):
        t += rng.expovariate(rate_per_s)
        n = rng.choice([1, 2, 4, 8, 16])
        out.append(Chain(f"p{i}", t, [(rng.randint(50, 800), rng.randint(20, 400)) for _ in range(n)],
                         system_tokens=2000))
    return out


def run(policy: str, kind: str, trace: list[Chain]) -> dict:
    d = DictProgramDirectory()
    p = SchedulingPolicy(PolicyName(policy))
    if kind == "lite":
        eng = LiteEngine("e0", p, d, LiteEngineConfig(num_blocks=NUM_KV_BLOCKS))
    else:
        eng = EmulatedVllmEngine("e0", p, d, num_kv_blocks=NUM_KV_BLOCKS, max_model_len=32768)
    t0 = time.perf_counter()
    res = drive(eng, d, trace)
    lat = [res.program_finish_s[c.program_id] - c.arrival_s for c in trace]
    tokens = [sum(o for _, o in c.calls) for c in trace]
    return {"policy": policy, "engine": kind, "end_s": res.end_s,
            "mean_norm_ms_per_token": 1000 * statistics.fmean(x / n for x, n in zip(lat, tokens, strict=True)),
            "p95_latency_s": sorted(lat)[int(0.95 * len(lat))], "steps": len(res.reports),
            "preemptions": sum(len(r.preempted) for r in res.reports),
            "prefix_hit_tokens": sum(c.prefix_hit_tokens for c in res.completions.values()),
            "recomputed_tokens": sum(c.recomputed_tokens for c in res.completions.values()),
            "wall_s": time.perf_counter() - t0}


def main(num_programs: int, seed: int = 1) -> None:
    trace = chains(num_programs, seed)
    for policy in ("fcfs", "plas", "atlas"):
        for kind in ("lite", "emulated"):
            r = run(policy, kind, trace)
            print(f"{policy:6s} {kind:9s} mean {r['mean_norm_ms_per_token']:8.2f} ms/token  p95 {r['p95_latency_s']:7.1f} s"
                  f"  end {r['end_s']:7.1f} s  steps {r['steps']:6d}  preemptions {r['preemptions']:4d}"
                  f"  hits {r['prefix_hit_tokens']:8d}  recomputed {r['recomputed_tokens']:7d}"
                  f"  wall {r['wall_s']:.1f} s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 120, int(sys.argv[2]) if len(sys.argv) > 2 else 1)
