"""The README's performance table, written from the results files (so no figure is copied by hand).

    python -m loadgen.bench.readme_table docs/results/mesh_ceilings.json docs/results/process_table_ceilings.json \
        docs/results/peer_stub.json docs/results/peer_vllm.json

Each figure is the median of the repeats with its spread ((max - min) / median) and, where it has
one, the ceiling or peer it is measured against in the same run. A file that is missing is skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _fig(s: dict | None, digits: int = 1, unit: str = "") -> str:
    if not s or s.get("median") is None:
        return "n/a (run failed)"
    spread = "" if s.get("spread") is None else f", spread {100 * s['spread']:.0f}%"
    return f"{s['median']:,.{digits}f}{unit} ({s['min']:,.{digits}f}-{s['max']:,.{digits}f}{spread})"


def _ratio(s: dict | None) -> str:
    if not s or s.get("median") is None:
        return "no ratio (ceiling run failed)"
    spread = "" if s.get("spread") is None else f", spread {100 * s['spread']:.0f}%"
    return f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f}{spread})"


def mesh_rows(d: dict) -> list[str]:
    s, cmd = d["summary"], d["command"]
    c, f = s["ceilings"], s["fraction_of_ceiling"]
    cpu = {k: v["median"] for k, v in s["cpu_ms_per_call"].items()}
    rows = [
        f"| mesh, full path calls/s | {_fig(s['calls_per_s'], 0)} | direct engine calls/s {_fig(c['direct_engine']['per_s'], 0)} "
        f"| {_ratio(f['direct_engine'])} | `{cmd}` |",
        f"| mesh, full path calls/s | (same) | bare uvicorn, same bytes {_fig(c['bare_http']['per_s'], 0)} "
        f"| {_ratio(f['bare_http'])} | (same run) |",
        f"| mesh, full path calls/s | (same) | NATS request/reply {_fig(c['nats_request']['per_s'], 0)} "
        f"| {_ratio(f['nats_request'])} | (same run) |",
        f"| mesh, full path calls/s | (same) | JetStream publish {_fig(c['jetstream']['publish_per_s'], 0)}, "
        f"pull+ack {_fig(c['jetstream']['pull_ack_per_s'], 0)} | {_ratio(f['jetstream_publish'])}, "
        f"{_ratio(f['jetstream_pull_ack'])} | (same run) |",
        f"| mesh, added latency p50 / p99 over the direct engine call | {_fig(s['added_latency_ms']['p50'], 2, ' ms')} / "
        f"{_fig(s['added_latency_ms']['p99'], 2, ' ms')} | direct call p50 {_fig(s['direct_ms']['p50'], 2, ' ms')}, "
        f"bare HTTP p50 {_fig(s['bare_http_ms']['p50'], 2, ' ms')} | - | (same run) |",
        "| mesh, CPU per call (ms, median) | " + ", ".join(f"{k} {v:.3f}" for k, v in cpu.items())
        + " | - | - | (same run) |",
    ]
    return rows


def table_rows(d: dict) -> list[str]:
    s, cmd = d["summary"], d["setup"]["command"]
    c, f = s["ceilings"], s["fraction_of_ceiling"]
    return [
        f"| process table, drain events/s | {_fig(s['events_per_s'], 0)} | batched upserts, same rows, same server "
        f"{_fig(c['upsert']['per_s'], 0)} | {_ratio(f['upsert'])} | `{cmd}` |",
        f"| process table, drain events/s | (same) | JetStream pull+ack alone {_fig(c['jetstream']['pull_ack_per_s'], 0)} "
        f"| {_ratio(f['jetstream_pull_ack'])} | (same run) |",
        f"| process table, propagation p50 / p99 at {d['runs'][0]['propagation']['target_rate_per_s']:.0f} events/s "
        f"| {_fig(s['propagation_ms']['p50'], 1, ' ms')} / {_fig(s['propagation_ms']['p99'], 1, ' ms')} | target p99 10 ms "
        f"| - | (same run) |",
    ]


def peer_rows(d: dict, name: str) -> list[str]:
    s, cmd = d["summary"], d["command"]
    t, a, v = s["throughput"], s["added_ms"], s["mesh_vs_vllm_router"]
    return [
        f"| {name}: calls/s direct / vllm-router / mesh ({d['concurrency']} streams) | "
        f"{_fig(t['direct']['calls_per_s'], 0)} / {_fig(t['vllm_router']['calls_per_s'], 0)} / "
        f"{_fig(t['mesh']['calls_per_s'], 0)} | vllm-router | mesh / vllm-router {_ratio(v['calls_per_s_ratio'])} "
        f"| `{cmd}` |",
        f"| {name}: added e2e p50 / p99, first token p50 over direct, vllm-router | "
        f"{_fig(a['vllm_router']['e2e_p50_added_ms'], 2, ' ms')} / {_fig(a['vllm_router']['e2e_p99_added_ms'], 2, ' ms')}, "
        f"{_fig(a['vllm_router']['ttft_p50_added_ms'], 2, ' ms')} | direct call | - | (same run) |",
        f"| {name}: added e2e p50 / p99, first token p50 over direct, mesh | "
        f"{_fig(a['mesh']['e2e_p50_added_ms'], 2, ' ms')} / {_fig(a['mesh']['e2e_p99_added_ms'], 2, ' ms')}, "
        f"{_fig(a['mesh']['ttft_p50_added_ms'], 2, ' ms')} | vllm-router | mesh p50 over vllm-router "
        f"{_fig(v['e2e_p50_added_over_router_ms'], 2, ' ms')} | (same run) |",
    ]


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    print("| figure | measured: median (min-max, spread of repeats) | ceiling or peer, same run | ratio | command |")
    print("|---|---|---|---|---|")
    for path in paths:
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        if "setup" in d:
            rows = table_rows(d)
        elif "vllm_router" in d:
            rows = peer_rows(d, "peer, " + ("stub" if "stub" in d["upstream"] else "real vLLM"))
        else:
            rows = mesh_rows(d)
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
