"""Backend upstream with calls queued at its engine: program priority against FCFS order, and the
agent's service estimate against the in-engine measure, on the same programs in one run.

`python -m loadgen.live.upstream_bench --json PATH` starts vLLM's own OpenAI server on the tiny model
with `--scheduling-policy priority --max-num-seqs N` (few running slots, so calls queue), then runs
the same programs (the live load generator's workload, Poisson arrivals, `ignore_eos` so every call
runs its full length) in three phases, one after the other:
  1. `autellix up --upstream URL` with SCHEDULING_POLICY=fcfs: the agent sends no priority,
  2. the same with atlas: the agent sends the program's MLFQ level as vLLM's `priority`,
  3. `autellix up --backend vllm --model tiny` with atlas and the same vLLM flags: our scheduler in
     the engine measures each call's service itself; then
  4. phase 3 again on a fresh engine: how much the in-engine measure itself moves between two runs.
The upstream's prefix cache is emptied between phases 1 and 2 (the programs' prompts are the same).
Reports mean program latency by size class (tertiles of the programs' output tokens) for 1 and 2,
and per program the ratio of its service (summed over its CallCompleted events) in 2 to that in 3,
beside the ratio of 4 to 3 (the noise floor of a comparison across runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from loadgen.live.driver import LiveDriver
from loadgen.live.real_servers import API_KEY, REPO_ROOT, free_port, stop, wait_ready
from loadgen.live.run import LiveRunConfig, programs_for
from loadgen.results_json import write_json
from shared.stats import percentile


def _env(policy: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    return env | {"AUTELLIX_API_KEYS": f"bench:{API_KEY}", "HF_HUB_OFFLINE": "1", "SCHEDULING_POLICY": policy}


def _mesh(state: Path, engine: list[str], policy: str, startup_s: float) -> tuple[subprocess.Popen, str]:
    state.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "autellix", "up", *engine, "--state-dir", str(state),
                             "--port", str(port), "--nats-port", "0", "--startup-timeout", str(startup_s)],
                            cwd=REPO_ROOT, env=_env(policy), stdout=open(state / f"up-{port}.log", "w"),
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc, time.monotonic() + startup_s, state)
    return proc, url


def _service_by_program(state: Path) -> dict[str, float]:
    """Each program's service summed over its CallCompleted events (the audit stream): the table's
    attained service restarts at 0 when the controller promotes a program."""
    out = subprocess.run([sys.executable, "-m", "autellix", "events", "tail", "--state-dir", str(state), "--json"],
                         capture_output=True, text=True, timeout=120, cwd=REPO_ROOT).stdout
    totals: dict[str, float] = {}
    for line in out.splitlines():
        event = json.loads(line)
        if event.get("type") == "call.completed":
            body = event["body"]
            totals[body["program_id"]] = totals.get(body["program_id"], 0.0) + body["service_s"]
    return totals


async def _phase(url: str, config: LiveRunConfig, rate: float, state: Path) -> list[dict]:
    from services.session_api.session_ids import program_id_for

    programs = programs_for(config, rate)
    driver = LiveDriver(url, API_KEY, "tiny", extra_body={"ignore_eos": True})
    try:
        records = await driver.run(programs, None, config.drain_timeout_s)
    finally:
        await driver.close()
    await asyncio.sleep(2.0)  # the last completions reach the stream
    service = _service_by_program(state)
    return [{"program": rec.program_id, "latency_s": None if rec.finish_s is None else rec.finish_s - rec.arrival_s,
             "output_tokens": rec.output_tokens, "calls": rec.num_calls, "failed_calls": rec.failed_calls,
             "error": rec.error, "attained_service_s": service.get(program_id_for("bench", rec.session_id))
             if rec.session_id else None} for rec in records]


def _by_size(records: list[dict], bounds: tuple[int, int]) -> dict:
    classes = {"short": [], "medium": [], "long": []}
    for r in records:
        size = "short" if r["output_tokens"] <= bounds[0] else "medium" if r["output_tokens"] <= bounds[1] else "long"
        if r["latency_s"] is not None:
            classes[size].append(r["latency_s"])
    return {k: {"programs": len(v), "mean_latency_s": round(statistics.fmean(v), 2) if v else None}
            for k, v in classes.items()}


def _service_error(upstream: list[dict], in_engine: list[dict]) -> dict:
    ratios = []
    for a, b in zip(upstream, in_engine, strict=True):
        if a["attained_service_s"] and b["attained_service_s"]:
            ratios.append(a["attained_service_s"] / b["attained_service_s"])
    total_up = sum(r["attained_service_s"] or 0 for r in upstream)
    total_in = sum(r["attained_service_s"] or 0 for r in in_engine)
    return {"programs": len(ratios),
            **{f"ratio_p{q}": round(percentile(ratios, q), 3) if ratios else None for q in (10, 50, 90)},
            "total_ratio": round(total_up / total_in, 3) if total_in else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.upstream_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="chatbot")
    p.add_argument("--programs", type=int, default=16)
    p.add_argument("--rate", type=float, default=0.2, help="program arrivals per second")
    p.add_argument("--max-num-seqs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    from services.engine_agent.vllm_main import TINY_MODEL_VLLM_ARGS
    from shared.engine.tiny_model import make_tiny_model

    state = Path(tempfile.mkdtemp(prefix="autellix-upstream-bench-", dir="/tmp"))
    vllm_flags = [*TINY_MODEL_VLLM_ARGS, "--max-num-seqs", str(args.max_num_seqs)]
    config = LiveRunConfig(url="", api_key=API_KEY, workload=args.workload, rates=[args.rate],
                           num_programs=args.programs, seed=args.seed, drain_timeout_s=1200)
    phases: dict[str, list[dict]] = {}
    direct = mesh = None
    t0 = time.perf_counter()
    try:
        model_dir = make_tiny_model(state / "tiny-model")
        port = free_port()
        direct = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                                   str(model_dir), "--served-model-name", "tiny", "--port", str(port), "--host",
                                   "127.0.0.1", "--scheduling-policy", "priority", *vllm_flags],
                                  cwd=state, env=_env("fcfs") | {"VLLM_SERVER_DEV_MODE": "1"}, stdout=open(state / "direct.log", "w"),
                                  stderr=subprocess.STDOUT)
        upstream = f"http://127.0.0.1:{port}"
        wait_ready(upstream, direct, time.monotonic() + 400, state)
        for name, policy in (("upstream_fcfs", "fcfs"), ("upstream_atlas", "atlas")):
            httpx.post(f"{upstream}/reset_prefix_cache", timeout=30).raise_for_status()
            mesh, url = _mesh(state / name, ["--upstream", upstream], policy, 120)
            phases[name] = asyncio.run(_phase(url, config, args.rate, state / name))
            stop(mesh)
        stop(direct)
        direct = None
        engine = ["--backend", "vllm", "--model", "tiny", "--engines", "1", "--vllm-args",
                  f"--max-num-seqs {args.max_num_seqs}"]
        for name in ("in_engine_atlas", "in_engine_atlas_again"):
            mesh, url = _mesh(state / name, engine, "atlas", 400)
            phases[name] = asyncio.run(_phase(url, config, args.rate, state / name))
            stop(mesh)
    finally:
        stop(mesh)
        stop(direct)
        shutil.rmtree(state, ignore_errors=True)
    sizes = sorted(r["output_tokens"] for r in phases["upstream_fcfs"])
    bounds = (sizes[len(sizes) // 3], sizes[2 * len(sizes) // 3])
    result = {
        "benchmark": "backend upstream: program priority vs FCFS at a queued vLLM server; service estimate vs "
                     "the in-engine measure (tiny model, CPU)",
        "command": "python -m loadgen.live.upstream_bench " + " ".join(argv or sys.argv[1:]),
        "workload": args.workload, "programs": args.programs, "rate": args.rate, "max_num_seqs": args.max_num_seqs,
        "size_class_bounds_output_tokens": bounds,
        "latency_by_size": {name: _by_size(recs, bounds) for name, recs in phases.items()},
        "mean_latency_s": {name: round(statistics.fmean([r["latency_s"] for r in recs if r["latency_s"]]), 2)
                           for name, recs in phases.items()},
        "failed_programs": {name: sum(1 for r in recs if r["error"] or r["latency_s"] is None)
                            for name, recs in phases.items()},
        "service_estimate_vs_in_engine": _service_error(phases["upstream_atlas"], phases["in_engine_atlas"]),
        "in_engine_vs_itself": _service_error(phases["in_engine_atlas_again"], phases["in_engine_atlas"]),
        "wall_s": round(time.perf_counter() - t0, 1),
        "programs_detail": phases,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "programs_detail"}, indent=1))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
