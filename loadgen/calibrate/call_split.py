"""Where each live call's time went: the path to the engine, the engine, and the path back.

    python -m loadgen.calibrate.call_split STEPS-client-calls.jsonl STEPS-calls.jsonl [--hop-marks DIR] [--json OUT]

`live_vs_sim --step-log-dir` writes both files beside the step log: the calls at the client
(sent, first token, end) and the engine's calls log (`shared.engine.step_log`), on one monotonic
clock. A client call is matched to the engine call of the same thread and prompt length that the
engine took first at or after it was sent. Per call:
- to engine: sent at the client -> taken by the engine's scheduler (HTTP, the API, the mesh, vLLM's
  front end and tokenizer);
- in engine: taken -> finished (`waiting` of it queued, by the scheduler's own count);
- back: finished in the engine -> the stream's end at the client.
The simulator charges a fixed path per call (`live_vs_sim --call-path-ms`) and models the engine;
this shows what the path costs under the run's own load. A diagnostic, not a benchmark figure.

With `--hop-marks DIR` (the run's services started with `loadgen/live/hop_marks` first on PYTHONPATH
and HOP_MARKS_DIR=DIR), the path to the engine is split at the mesh's hops, for calls sent alone and
for calls sent with others of their session (a fan-out):
client -> API (HTTP, the request's checks, chat template and token count), the API's limits and
session, the router's decision and its command to the engine agent, the agent up to vLLM's front end,
and vLLM's front end -> its scheduler (vLLM's chat template and tokenizer, the engine core's input).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from loadgen.results_json import finite, write_json
from shared.stats import percentile


def read_lines(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def match(client: list[dict], engine: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs (client call, engine call): the same thread and prompt tokens, the engine's earliest
    unclaimed call taken at or after the client sent it. Unmatched calls are left out."""
    pool: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for e in sorted(engine, key=lambda e: e["added_s"]):
        pool[(e["thread_id"], e["prompt_tokens"])].append(e)
    pairs = []
    for c in sorted(client, key=lambda c: c["sent_s"]):
        candidates = pool.get((c["thread_id"], c["prompt_tokens"]), [])
        for i, e in enumerate(candidates):
            if e["added_s"] >= c["sent_s"] and e["finish_s"] is not None and e["finish_s"] <= c["end_s"]:
                pairs.append((c, candidates.pop(i)))
                break
    return pairs


def split(pairs: list[tuple[dict, dict]]) -> list[dict]:
    return [{"to_engine_s": e["added_s"] - c["sent_s"], "in_engine_s": e["finish_s"] - e["added_s"],
             "waiting_s": e["wait_s"], "back_s": c["end_s"] - e["finish_s"], "total_s": c["end_s"] - c["sent_s"],
             "sent_s": c["sent_s"]} for c, e in pairs]


def with_engine_load(rows: list[dict], engine: list[dict]) -> list[dict]:
    """Each row with the number of calls the engine held when the client sent it."""
    for r in rows:
        r["engine_calls_at_send"] = sum(1 for e in engine if e["added_s"] <= r["sent_s"] < (e["finish_s"] or 0))
    return rows


def stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {"n": len(values), "mean_ms": sum(values) / len(values) * 1e3, "p50_ms": percentile(values, 50) * 1e3,
            "p90_ms": percentile(values, 90) * 1e3, "p99_ms": percentile(values, 99) * 1e3}


def summarize(rows: list[dict]) -> dict:
    parts = ("to_engine_s", "back_s", "in_engine_s", "waiting_s", "total_s")
    out = {"all": {p: stats([r[p] for r in rows]) for p in parts},
           "path_s": stats([r["to_engine_s"] + r["back_s"] for r in rows])}
    by_load: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_load["0" if r["engine_calls_at_send"] == 0 else "1-2" if r["engine_calls_at_send"] <= 2 else "3+"].append(r)
    out["path_by_engine_calls_at_send"] = {k: stats([r["to_engine_s"] + r["back_s"] for r in v])
                                           for k, v in sorted(by_load.items())}
    return out


HOPS = (("client -> API", "sent", "api_start_in"), ("API: limits, session", "api_start_in", "api_route_in"),
        ("router -> engine agent", "api_route_in", "e_cmd_in"), ("engine agent", "e_cmd_in", "e_engine_in"),
        ("vLLM front end -> scheduler", "e_engine_in", "added"))
FAN_OUT_S = 0.05  # calls of one session sent this close together were sent together


def read_hop_marks(folder: str) -> dict[str, dict[str, float]]:
    """call id -> mark -> wall-clock seconds (each mark's first time)."""
    marks: dict[str, dict[str, float]] = defaultdict(dict)
    for log in Path(folder).glob("*.log"):
        for line in log.read_text().splitlines():
            ns, key, name = line.split()
            marks[key].setdefault(name, int(ns) / 1e9)
    return marks


def hop_split(pairs: list[tuple[dict, dict]], marks: dict[str, dict[str, float]], wall_offset_s: float | None) -> dict:
    """Per hop, the path's parts for calls sent alone and with others of their session."""
    sent = defaultdict(list)
    for c, _ in pairs:
        sent[c["session_id"]].append(c["sent_s"])
    groups: dict[str, dict[str, list[float]]] = {"alone": defaultdict(list), "with others": defaultdict(list)}
    for c, e in pairs:
        m = marks.get(e.get("call_id") or "")
        offset = c["sent_wall_s"] - c["sent_s"] if "sent_wall_s" in c else wall_offset_s
        if not m or offset is None or not all(a in m or a == "sent" for _, a, _ in HOPS):
            continue
        at = {name: t - offset for name, t in m.items()} | {"sent": c["sent_s"], "added": e["added_s"]}
        if not all(b in at for _, _, b in HOPS):
            continue
        together = sum(abs(t - c["sent_s"]) <= FAN_OUT_S for t in sent[c["session_id"]]) > 1
        for hop, a, b in HOPS:
            groups["with others" if together else "alone"][hop].append(at[b] - at[a])
    return {g: {hop: stats(v) for hop, v in hops.items()} for g, hops in groups.items() if hops}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("client_calls")
    p.add_argument("engine_calls")
    p.add_argument("--hop-marks", help="the run's HOP_MARKS_DIR: split the path to the engine at the mesh's hops")
    p.add_argument("--wall-offset-s", type=float, default=None,
                   help="wall clock minus monotonic clock when the run was made, for a client log without "
                        "sent_wall_s (the same boot only)")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args(argv)
    client, engine = read_lines(args.client_calls), read_lines(args.engine_calls)
    pairs = match(client, engine)
    rows = with_engine_load(split(pairs), engine)
    hops = hop_split(pairs, read_hop_marks(args.hop_marks), args.wall_offset_s) if args.hop_marks else None
    result = finite({"client_calls": len(client), "engine_calls": len(engine), "matched": len(rows),
                     **summarize(rows), "path_to_engine_by_hop": hops,
                     "command": "python -m loadgen.calibrate.call_split " + " ".join(sys.argv[1:])})
    for k, v in result["all"].items():
        print(f"{k:>12}: " + "  ".join(f"{m} {x:.1f}" for m, x in v.items() if m != "n"))
    print(f"{'path':>12}: " + "  ".join(f"{m} {x:.1f}" for m, x in result["path_s"].items() if m != "n"))
    for k, v in result["path_by_engine_calls_at_send"].items():
        print(f"  path, {k:>3} calls in the engine at send (n={v['n']}): p50 {v.get('p50_ms', 0):.1f} ms, "
              f"mean {v.get('mean_ms', 0):.1f} ms")
    for group, by_hop in (hops or {}).items():
        print(f"to the engine, calls sent {group} (n={next(iter(by_hop.values()))['n']}): "
              + ", ".join(f"{hop} {v['p50_ms']:.0f}" for hop, v in by_hop.items()) + " ms (p50)")
    print(f"matched {len(rows)} of {len(client)} client calls ({len(engine)} in the engine's log)")
    if args.json_path:
        write_json(args.json_path, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
