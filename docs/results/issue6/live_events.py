"""Summarise `autellix events tail --json` (stdin) for the issue 6 live runs: the engines' view of
every completed call (prefix hits, tokens recomputed after preemptions, preemptions), so the
client-side recompute share can be checked against what the engines did."""

from __future__ import annotations

import json
import sys


def main() -> None:
    calls = preempted = prompt = hits = recomputed = stolen = 0
    engines: dict[str, int] = {}
    for line in sys.stdin:
        event = json.loads(line)
        if event.get("type") == "call.preempted":
            preempted += 1
        if event.get("type") == "call.routed" and event["body"].get("reason", "").startswith("stolen"):
            stolen += 1  # a queued call moved by work stealing
        if event.get("type") != "call.completed":
            continue
        body = event["body"]
        calls += 1
        prompt += body["prompt_tokens"]
        hits += body["prefix_hit_tokens"]
        recomputed += body["recomputed_tokens"]
        engines[body["engine_id"]] = engines.get(body["engine_id"], 0) + 1
    computed = prompt - hits + recomputed
    json.dump({"completed_calls": calls, "preemption_events": preempted, "prompt_tokens": prompt,
               "prefix_hit_tokens": hits, "preemption_recomputed_tokens": recomputed,
               "computed_prefill_tokens": computed, "calls_per_engine": engines, "calls_moved_by_stealing": stolen}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
