"""The `tiny-cpu` preset: fitted from the stored profile of the real engine, computed the same way
by the cost model and the lite engine; the live-vs-sim run's pieces (shrunk programs, token-exact
prompts, the comparison, refusals)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from loadgen.calibrate.exact_prompts import segment_text
from loadgen.calibrate.fit_cpu import TERMS, fit, predict
from loadgen.calibrate.live_vs_sim import (
    compare,
    core_slowdown,
    engine_speeds,
    scaled_fit_cost,
    wall_fit_cost,
)
from loadgen.calibrate.live_vs_sim import main as live_vs_sim_main
from loadgen.calibrate.scaled import shrink
from loadgen.calibrate.sim_side import RealEngineShape, simulate, with_call_path
from loadgen.workloads.registry import make_programs
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import DictProgramDirectory, EngineCall
from shared.engine.cost_model import TINY_CPU_FIT, CostModel, get_preset
from shared.engine.lite import LiteEngine, LiteEngineConfig

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "docs" / "results" / "tiny_cpu_profile.json"


def test_preset_is_the_fit_of_the_stored_profile():
    steps = json.loads(PROFILE.read_text())["steps"]
    coef = fit(steps)
    for term in TERMS:
        assert TINY_CPU_FIT[term] == pytest.approx(coef[term], rel=1e-4, abs=1e-12), term


def test_another_fit_file_replaces_exactly_the_fitted_terms():
    preset = get_preset("tiny-cpu")
    same = wall_fit_cost(str(ROOT / "docs" / "results" / "tiny_cpu_fit.json"), "tiny-cpu").preset
    assert same.step_overhead_s == pytest.approx(preset.step_overhead_s, rel=1e-4)
    assert same.linear_s_per_token == pytest.approx(preset.linear_s_per_token, rel=1e-4)
    assert same.fitted_attn_read_s_per_token == pytest.approx(preset.fitted_attn_read_s_per_token, rel=1e-4)
    assert same.fitted_attn_pair_s == pytest.approx(preset.fitted_attn_pair_s, rel=1e-4)
    assert same.num_kv_blocks == preset.num_kv_blocks


def test_a_speed_factor_scales_every_fitted_term_and_nothing_else():
    fit_path = str(ROOT / "docs" / "results" / "tiny_cpu_fit.json")
    base = wall_fit_cost(fit_path, "tiny-cpu").preset
    slower = scaled_fit_cost(fit_path, "tiny-cpu", 1.25).preset
    for term in ("step_overhead_s", "linear_s_per_token", "fitted_attn_read_s_per_token", "fitted_attn_pair_s"):
        assert getattr(slower, term) == pytest.approx(1.25 * getattr(base, term)), term
    assert slower.num_kv_blocks == base.num_kv_blocks
    # a fit from before the core probe carries no reading: no core-speed scaling is offered
    assert core_slowdown(fit_path, {"ns_per_iteration": 60.0}) is None


def test_a_call_path_delays_every_call_and_only_that():
    programs = make_programs("react", 3, seed=0)
    pathed = with_call_path(programs, 0.05)
    for before, after in zip(programs, pathed, strict=True):
        assert [c.delay_s + 0.05 for c in before.calls] == pytest.approx([c.delay_s for c in after.calls])
        assert [(c.prompt_segments, c.output_tokens, c.depends_on) for c in before.calls] == \
            [(c.prompt_segments, c.output_tokens, c.depends_on) for c in after.calls]
    shape = RealEngineShape(max_num_seqs=2)
    plain = simulate(programs, "fcfs", "tiny-cpu", shape, 1e9)
    slower = simulate(pathed, "fcfs", "tiny-cpu", shape, 1e9)
    assert slower["mean_completion_s"] > plain["mean_completion_s"]
    with pytest.raises(ValueError, match=">= 0"):
        with_call_path(programs, -0.01)


def test_fit_recovers_known_coefficients():
    rng = random.Random(1)
    truth = {"overhead_s": 4e-3, "s_per_token": 1e-4, "s_per_ctx_token": 2e-6, "s_per_pair": 3e-8}
    steps = []
    for _ in range(200):
        n = rng.choice([0, 16, 256, 2048])
        after = n + rng.choice([0, 1024, 8192]) if n else 0
        dec = rng.randrange(0, 8)
        step = {"tokens": n + dec, "decode_ctx": dec * rng.randrange(10, 5000), "chunks": [(n, after)] if n else []}
        if not step["tokens"]:
            continue
        step["duration_s"] = predict(truth, step)
        steps.append(step)
    got = fit(steps)
    for term in TERMS:
        assert got[term] == pytest.approx(truth[term], rel=1e-6)


def test_cost_model_adds_the_fitted_terms():
    cm = CostModel("tiny-cpu")
    f = TINY_CPU_FIT
    assert cm.step_s(3, 3000) == pytest.approx(f["overhead_s"] + 3 * f["s_per_token"] + 3000 * f["s_per_ctx_token"])
    pairs = 512 * (1024 + 513 / 2)
    assert cm.step_s(512, 0, ((512, 1536),)) == pytest.approx(
        f["overhead_s"] + 512 * f["s_per_token"] + 1536 * f["s_per_ctx_token"] + pairs * f["s_per_pair"])
    assert cm.num_kv_blocks == 16384  # 256 MiB of 1 KiB tokens, in blocks of 16


def test_lite_engine_steps_cost_what_the_preset_says():
    """The lite engine's hot path (its own copy of the formula) agrees with CostModel.step_s."""
    directory = DictProgramDirectory()
    policy = SchedulingPolicy(PolicyName.FCFS)
    engine = LiteEngine("e0", policy, directory, LiteEngineConfig(preset="tiny-cpu", token_budget=4096))
    engine.submit(EngineCall("c1", "p1", "main", (("s1", 1000),), 3, 0.0, 0.0, 0), 0.0)
    first = engine.step(0.0)
    cm = CostModel("tiny-cpu")
    assert first.duration_s == pytest.approx(cm.step_s(1000, 0, ((1000, 1000),)), rel=1e-9)
    second = engine.step(first.duration_s)
    assert second.duration_s == pytest.approx(cm.step_s(1, 1001), rel=1e-3)


def test_shrink_keeps_the_programs_shape():
    progs = make_programs("mapreduce", 3, 0)
    small = shrink(progs, 16)
    for a, b in zip(progs, small, strict=True):
        assert [c.call_id for c in a.calls] == [c.call_id for c in b.calls]
        assert [c.depends_on for c in a.calls] == [c.depends_on for c in b.calls]
        assert all(c.output_tokens >= 1 for c in b.calls)
        assert b.output_tokens <= a.output_tokens / 16 + len(a.calls)
        outs = {f"out:{c.call_id}": c.output_tokens for c in b.calls}
        for c in b.calls:  # an output segment keeps the length of the output it stands for
            for seg, n in c.prompt_segments:
                if seg in outs:
                    assert n == outs[seg]
    assert shrink(progs, 1) is progs
    with pytest.raises(ValueError):
        shrink(progs, 0)


def test_segment_text_is_that_many_tiny_model_tokens(tmp_path):
    pytest.importorskip("tokenizers", reason="tokenizers comes with the vllm extra (make setup)")
    from tokenizers import Tokenizer

    from shared.engine.tiny_model import make_tiny_model

    tok = Tokenizer.from_file(str(make_tiny_model(tmp_path / "tiny") / "tokenizer.json"))
    for n in (1, 17, 300):
        assert len(tok.encode(segment_text(f"seg-{n}", n)).ids) == n
    assert segment_text("a", 50) == segment_text("a", 50) != segment_text("b", 50)


def test_simulated_side_runs_the_real_engines_limits():
    progs = shrink(make_programs("react", 3, 0), 8)
    out = simulate(progs, "atlas", "tiny-cpu", RealEngineShape(max_num_seqs=2), 1e9)
    assert out["completed_programs"] == 3
    assert out["regime"]["mean_running_calls"] <= 2


def test_comparison_ratio_and_order():
    live = {"fcfs": {"mean_norm_latency_s": 0.2, "p50_completion_s": 10, "p99_completion_s": 20, "mean_completion_s": 12},
            "atlas": {"mean_norm_latency_s": 0.1, "p50_completion_s": 8, "p99_completion_s": 30, "mean_completion_s": 9}}
    sim = {"fcfs": {"mean_norm_latency_s": 0.22, "p50_completion_s": 10, "p99_completion_s": 20, "mean_completion_s": 12},
           "atlas": {"mean_norm_latency_s": 0.3, "p50_completion_s": 8, "p99_completion_s": 30, "mean_completion_s": 9}}
    c = compare(live, sim)
    assert c["sim_over_live"]["fcfs"]["mean_norm_latency_s"] == pytest.approx(1.1)
    assert c["within_15pct"] == {"fcfs": True, "atlas": False}
    assert c["order_live"] == ["atlas", "fcfs"] and not c["same_order"]
    assert c["engine_speed"] == {"steps_over_fit": {"fcfs": None, "atlas": None}, "ratio": None, "differs": None}


def test_live_engine_speeds_that_differ_between_the_policies_are_flagged():
    def live(fcfs_speed, atlas_speed):
        return {"fcfs": {"steps": {"live_over_fit": fcfs_speed}}, "atlas": {"steps": {"live_over_fit": atlas_speed}}}
    even = engine_speeds(live(1.28, 1.33))
    assert even["ratio"] == pytest.approx(1.33 / 1.28) and even["differs"] is False
    uneven = engine_speeds(live(1.67, 1.30))
    assert uneven["ratio"] == pytest.approx(1.67 / 1.30) and uneven["differs"] is True
    assert engine_speeds(live(float("nan"), 1.3))["differs"] is None
    assert engine_speeds({"fcfs": {"steps": {"live_over_fit": 1.2}}})["differs"] is None  # one policy: nothing to compare


@pytest.mark.parametrize(("argv", "needle"), [
    (["--rate", "1", "--policies", "fcfs,srpt"], "srpt cannot run live"),
    (["--rate", "1", "--policies", "lottery"], "valid policies"),
    (["--rate", "1", "--preset", "tpu"], "valid presets"),
    (["--rate", "1", "--workload", "nope"], "valid workloads"),
    (["--rate", "1", "--warmup-programs", "-1"], "--warmup-programs must be >= 0"),
    (["--rate", "1", "--placement", "pinned"], "invalid choice: 'pinned'"),
])
def test_live_vs_sim_refuses_bad_input(argv, needle, capsys):
    with pytest.raises(SystemExit) as exit_:
        live_vs_sim_main(argv)
    assert exit_.value.code == 2
    assert needle in capsys.readouterr().err
