"""`python -m loadgen.calibrate.live_vs_sim` at a tiny size, end to end on a real engine: the warm-up
programs run before the clock (the step log then holds the measured run only), the placement is
applied and recorded, the run is simulated again on a fit of its own steps and on the fit scaled by
the speed measured just before it, each call is logged at the client and in the engine, and the
driver's own process is left unpinned for the next stack. No timing is asserted."""

from __future__ import annotations

import json
import os

import pytest

from loadgen.calibrate.call_split import match, read_lines, split
from loadgen.calibrate.insample_resim import main as insample_main
from loadgen.calibrate.live_vs_sim import main as live_vs_sim_main
from runtime import cpu_placement
from tests.vllm.needs_vllm import require_vllm


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="placement needs at least 2 cores")
def test_a_tiny_live_vs_sim_run_warms_up_places_and_compares(tmp_path):
    require_vllm()
    steps = tmp_path / "steps"
    steps.mkdir()
    out = tmp_path / "result.json"
    # a fit as profile_cpu + fit_cpu write it, with the core's speed when it was profiled
    probe = {"cpu": 0, "ns_per_iteration": 50.0, "min": 50.0, "max": 50.0, "trials": 1}
    fit_path = tmp_path / "fit.json"
    fit_path.write_text(json.dumps({"coefficients": {"overhead_s": 2e-3, "s_per_token": 2e-5, "s_per_ctx_token": 1e-7,
                                                     "s_per_pair": 2e-8},
                                    "core_speed": {"before": probe, "after": probe, "ns_per_iteration": 50.0}}))
    code = live_vs_sim_main(["--workload", "chatbot", "--programs", "1", "--rate", "1", "--token-scale", "16",
                             "--max-num-seqs", "2", "--policies", "fcfs", "--warmup-programs", "1",
                             "--placement", "engine-alone", "--step-log-dir", str(steps), "--call-path-ms", "32",
                             "--fit", str(fit_path), "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    live = result["live"]["fcfs"]
    assert live["completed_programs"] == 1 and not live["errors"]
    assert live["warmup_programs"] == 1 and result["warmup_programs"] == 1
    [program] = live["per_program"]  # the measured program's own figures, none of the warm-up's
    assert program["output_tokens"] == result["program_output_tokens"][0] and program["calls"] >= 1
    placed = live["cpu_placement"]
    assert placed["placement"] == "engine-alone" and placed["engine_core_cpus"] == placed["worker_cpus"]
    assert set(placed["worker_cpus"]).isdisjoint(placed["other_cpus"])
    # the measured program's steps only: its own prompt and output tokens, none of the warm-up's
    logged = live["steps"]["num_steps"]
    assert 1 <= logged <= result["program_output_tokens"][0] + 8, logged
    assert result["sim"]["fcfs"]["completed_programs"] == 1
    # the controller's promotions, counted on both sides
    assert live["regime"]["promotions"] >= 0 and result["sim"]["fcfs"]["regime"]["promotions"] >= 0
    # the run simulated again on a fit of its own steps (the engine speed it had)
    assert set(live["steps"]["own_fit"]) == {"overhead_s", "s_per_token", "s_per_ctx_token", "s_per_pair"}
    in_sample = result["sim_other_presets"]["own steps+path 32 ms (in-sample)"]
    assert in_sample["sim"]["fcfs"]["completed_programs"] == 1
    # the engine's speed measured just before the run scales the fit: the worker's core, probed
    # around the run, and the warm-up's steps (kept aside, never the measured program's)
    speed = live["core_speed"]
    assert set(placed["worker_cpus"]) == {speed["before"]["cpu"]} and speed["ns_per_iteration"] > 0
    assert live["core_slowdown_vs_profile"] == pytest.approx(speed["ns_per_iteration"] / 50.0)
    assert live["warmup_steps"]["num_steps"] >= 1 and live["warmup_steps"]["steps_over_fit"] > 0
    for scaled in ("fit x core speed+path 32 ms", "fit x warm-up speed+path 32 ms"):
        assert result["sim_other_presets"][scaled]["sim"]["fcfs"]["completed_programs"] == 1
    assert os.sched_getaffinity(0) == cpu_placement.every_cpu()
    # each measured call at the client and in the engine, on one clock, matched one to one
    # (the warm-up's calls are not in either file)
    client = read_lines(str(steps / "chatbot-fcfs-steps-client-calls.jsonl"))
    engine = read_lines(str(steps / "chatbot-fcfs-steps-calls.jsonl"))
    assert len(client) == len(engine) == program["calls"]
    rows = split(match(client, engine))
    assert len(rows) == program["calls"]
    for r in rows:
        assert r["to_engine_s"] >= 0 and r["back_s"] >= 0 and 0 <= r["waiting_s"] <= r["in_engine_s"]
        assert r["to_engine_s"] + r["in_engine_s"] + r["back_s"] == pytest.approx(r["total_s"])
    # the run simulated again in-sample: its speed per window, its loop gap, each call's own path
    again = tmp_path / "insample.json"
    assert insample_main(["--run", "1", "fcfs", str(out), str(steps / "chatbot-fcfs-steps.jsonl"),
                          "--windows", "10", "--json", str(again)]) == 0
    run = json.loads(again.read_text())["runs"]["1"]["fcfs"]
    assert run["measured_paths"]["matched_calls"] == run["measured_paths"]["calls"] == program["calls"]
    assert run["loop_gap_ms"] >= 0
    assert {"constant", "constant + loop gap", "10 s windows", "measured paths"} <= set(run["sim"])
    assert all(v["completed_programs"] == 1 for v in run["sim"].values())
