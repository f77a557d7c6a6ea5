"""Where the workflow policy's gap to Bélády comes from: the same recorded trace replayed with the
online tool predictions and with oracle ones (the session's true pause before its next call on this
engine, and the true observation length). Run from the repository root:

    .venv/bin/python docs/results/issue6/belady_gap_analysis.py --router least-loaded [--capacities ...]

Writes docs/results/issue6/belady_gap_<router>.json. The oracles are analysis only (clairvoyant).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

from loadgen.sim.kv_experiments import KvExperiment, KvExperimentConfig
from shared.core.belady import (
    BlockTrace,
    BlockTraceRecorder,
    competitive_ratio,
    replay_belady,
    replay_belady_pinned,
    replay_lru,
    replay_prefix_lru,
    replay_workflow,
)
from shared.core.policy import PolicyName
from shared.core.tool_profiles import ToolPrediction, ToolProfiles, ToolResolution


class OraclePredictor:
    """ToolProfiles' interface; `idle` and/or `obs` come from the future of the trace."""

    def __init__(self, trace: BlockTrace, idle: bool, obs: bool) -> None:
        self._online = ToolProfiles()
        self._idle, self._obs = idle, obs
        first, last = {}, {}
        for a in trace.accesses:
            first.setdefault(a.call_id, a.time_s)
            last[a.call_id] = a.time_s
        by_session = defaultdict(list)
        for c, info in trace.calls.items():
            if c in first:
                by_session[info.session_id].append(c)
        self._gaps: dict[str, list[tuple[float, float]]] = {}
        for sid, calls in by_session.items():
            calls.sort(key=lambda c: first[c])
            ends = sorted(calls, key=lambda c: last[c])
            gaps = []
            for c in ends:  # the call ending k-th is followed by the next call admitted after it
                nxt = [d for d in calls if first[d] >= last[c] and d != c]
                if nxt:
                    d = nxt[0]
                    gaps.append((first[d] - last[c], float(trace.calls[d].obs_tokens)))
                else:
                    gaps.append((0.0, math.inf))  # never back on this engine: nothing to keep
            self._gaps[sid] = gaps
        self._sid = None

    def observe(self, sid, tool, idle_s, obs_tokens):
        return self._online.observe(sid, tool, idle_s, obs_tokens)

    def resolve(self, sid: str, hint: str | None) -> ToolResolution:
        self._sid = sid
        return self._online.resolve(sid, hint)

    def predict(self, tool: str, idle_hint_s: float | None = None) -> ToolPrediction:
        online = self._online.predict(tool, idle_hint_s)
        gaps = self._gaps.get(self._sid) or [(online.idle_s, online.obs_tokens)]
        idle_s, obs = gaps.pop(0)
        return ToolPrediction(tool, idle_s if self._idle else online.idle_s,
                              obs if self._obs else online.obs_tokens, True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--router", default="least-loaded")
    ap.add_argument("--rate", type=float, default=1.0)
    ap.add_argument("--capacities", default="27500,20000,16000,12000")
    args = ap.parse_args()
    cfg = KvExperimentConfig(workload="coding", rate=args.rate, num_programs=40, kv_policies=("prefix-lru",),
                             routers=(args.router,))
    exp = KvExperiment(cfg)
    recorder = BlockTraceRecorder()
    exp.run_one("prefix-lru", args.router, PolicyName.FCFS, "off", recorder=recorder)
    base = recorder.trace(27500)
    out = {"router": args.router, "rate": args.rate, "accesses": len(base.accesses), "by_capacity": {}}
    for cap in (int(x) for x in args.capacities.split(",")):
        trace = BlockTrace(cap, base.accesses, base.calls)
        opt = replay_belady(trace)
        pinned = replay_belady_pinned(trace)
        results = [replay_lru(trace), replay_prefix_lru(trace), replay_workflow(trace),
                   replay_workflow(trace, predictor=OraclePredictor(trace, idle=True, obs=False),
                                   name="workflow-oracle-idle"),
                   replay_workflow(trace, predictor=OraclePredictor(trace, idle=True, obs=True),
                                   name="workflow-oracle-idle-obs")]
        row = {"belady_misses": opt.misses, "compulsory": opt.compulsory_misses,
               "belady_pinned_misses": pinned.misses, "belady_pinned_forced": pinned.forced_evictions,
               "policies": {r.policy: {"misses": r.misses, "forced": r.forced_evictions,
                                       "ratio": competitive_ratio(r.misses, opt.misses),
                                       "ratio_vs_pinned": competitive_ratio(r.misses, pinned.misses)}
                            for r in results}}
        out["by_capacity"][str(cap)] = row
        print(cap, opt.misses, opt.compulsory_misses, pinned.misses,
              ", ".join(f"{k} {v['ratio']:.3f}/{v['ratio_vs_pinned']:.3f} (forced {v['forced']})"
                        for k, v in row["policies"].items()), flush=True)
    Path(f"docs/results/issue6/belady_gap_{args.router}.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
