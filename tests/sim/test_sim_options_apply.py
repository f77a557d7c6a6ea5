"""Every `autellix sim` option reaches what runs, in each mode that takes it, or is refused there.

Each case runs the CLI on a few programs with the engines' constructor spied on, and checks the
engines (or the simulation's config) saw the option's value, not the default.
"""

from __future__ import annotations

import json

import pytest

import loadgen.sim.experiment as experiment
import loadgen.sim.kv_experiments as kv_experiments
from autellix.cli import main
from loadgen.sim.cli_modes import KV_ONLY, SWEEP_ONLY
from tests.vllm.needs_vllm import require_vllm

SWEEP = ["sim", "--quiet", "--workload", "chatbot", "--policies", "fcfs", "--rates", "0.05",
         "--programs", "3", "--quick"]
KV = ["sim", "--quiet", "--workload", "chatbot", "--kv-policy", "prefix-lru", "--router", "least-loaded",
      "--rates", "0.05", "--programs", "3"]


@pytest.fixture
def seen(monkeypatch):
    """Engines built and simulation configs used by the runs of one CLI call."""
    out = {"engines": [], "sim_configs": []}
    build = experiment.build_engines

    def spy_build(options, policy, directory, n):
        engines = build(options, policy, directory, n)
        out["engines"].extend(engines)
        return engines
    monkeypatch.setattr(experiment, "build_engines", spy_build)
    kv_engines = kv_experiments.KvExperiment.engines

    def spy_kv(self, kv, policy, directory):
        engines = kv_engines(self, kv, policy, directory)
        out["engines"].extend(engines)
        return engines
    monkeypatch.setattr(kv_experiments.KvExperiment, "engines", spy_kv)
    for mod in (experiment, kv_experiments):
        sim_cls = mod.Simulation if mod is experiment else mod.KvSimulation

        def spy_sim(*a, _cls=sim_cls, **k):
            out["sim_configs"].append(a[4])
            return _cls(*a, **k)
        monkeypatch.setattr(mod, "Simulation" if mod is experiment else "KvSimulation", spy_sim)
    return out


def lite_cfg(engine):
    return engine.config


# (flag, value, what the engine or run shows, expected)
LITE_CASES = [
    ("--max-num-seqs", "3", lambda e, s: lite_cfg(e).max_num_seqs, 3),
    ("--num-blocks", "4000", lambda e, s: e.num_blocks, 4000),
    ("--batching", "v0", lambda e, s: lite_cfg(e).mode.value, "v0"),
    # the controller's (the run's), as in production; the engines never promote on their own
    ("--beta", "none", lambda e, s: (s.starvation.beta, lite_cfg(e).starvation.beta), (None, None)),
    ("--preset", "llama3.1-8b-h100", lambda e, s: lite_cfg(e).preset, "llama3.1-8b-h100"),
    ("--locality-threshold", "512", lambda e, s: s.locality_threshold_tokens, 512),
    ("--engines", "2", lambda e, s: len({x.engine_id for x in e}), 2),
]
SWEEP_CASES = [
    ("--no-prefix-cache", None, lambda e, s: lite_cfg(e).prefix_caching, False),
    ("--preemption", "swap", lambda e, s: lite_cfg(e).preemption.value, "swap"),
    ("--kv-victim", "policy", lambda e, s: lite_cfg(e).kv_victim, "policy"),
]


def _run(argv, seen):
    seen["engines"].clear()
    seen["sim_configs"].clear()
    assert main(argv) == 0
    assert seen["engines"] and seen["sim_configs"]
    return seen


@pytest.mark.parametrize("mode", ["sweep", "kv"])
@pytest.mark.parametrize(("flag", "value", "show", "expected"), LITE_CASES,
                         ids=[c[0] for c in LITE_CASES])
def test_option_reaches_the_engines_in_both_modes(mode, flag, value, show, expected, seen, capsys):
    base = SWEEP if mode == "sweep" else KV
    got = _run([*base, flag, value], seen)
    engines = got["engines"]
    if flag == "--engines":
        assert show(engines, None) == expected
        return
    assert {repr(show(e, got["sim_configs"][0])) for e in engines} == {repr(expected)}
    default = _run(base, seen)  # and without the flag the run differs
    assert show(default["engines"][0], default["sim_configs"][0]) != expected


@pytest.mark.parametrize(("flag", "value", "show", "expected"), SWEEP_CASES, ids=[c[0] for c in SWEEP_CASES])
def test_sweep_only_engine_options_apply(flag, value, show, expected, seen):
    got = _run([*SWEEP, flag] + ([value] if value else []), seen)
    assert {show(e, None) for e in got["engines"]} == {expected}


def test_sweep_json_records_the_engine_limits(tmp_path, seen):
    out = tmp_path / "s.json"
    _run([*SWEEP, "--max-num-seqs", "2", "--num-blocks", "5000", "--json", str(out)], seen)
    engine = json.loads(out.read_text())["engine"]
    assert (engine["max_num_seqs"], engine["num_blocks"]) == (2, 5000)


def test_max_num_seqs_changes_the_sweep_result(tmp_path):
    """Not only the config: with 1 running call per engine a map-reduce's forks queue, even alone."""
    def mean(extra):
        out = tmp_path / f"m{len(extra)}.json"
        assert main(["sim", "--quiet", "--workload", "mapreduce", "--policies", "fcfs", "--rates", "0.5",
                     "--programs", "6", "--quick", "--json", str(out), *extra]) == 0
        return json.loads(out.read_text())["unloaded"]["mean_norm_latency_s"]
    assert mean(["--max-num-seqs", "1"]) > 1.5 * mean([])


def test_kv_mode_slo_task_multiple_applies(tmp_path):
    out = tmp_path / "kv.json"
    assert main([*KV, "--slo-task-multiple", "7", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["slo_multiple"] == 7.0


def test_emulated_engine_takes_the_limits_in_the_sweep(seen):
    require_vllm()  # skips with the reason, or fails under AUTELLIX_REQUIRE_VLLM=1 (CI)
    got = _run([*SWEEP, "--engine", "emulated", "--max-num-seqs", "3", "--num-blocks", "4000"], seen)
    for e in got["engines"]:
        assert e.num_kv_blocks == 4000
        assert e.sched.max_num_running_reqs == 3


SWEEP_ONLY_ARGV = {"sweep": ["--sweep"], "slo": ["--slo", "0.1"], "slo_multiple": ["--slo-multiple", "5"],
                   "prefix_cache": ["--no-prefix-cache"], "bisect_steps": ["--bisect-steps", "2"],
                   "max_programs": ["--max-programs", "50"], "no_doubling_check": ["--no-doubling-check"],
                   "quick": ["--quick"], "arrivals": ["--arrivals", "burst"], "regimes": ["--regimes"],
                   "regime_programs": ["--regime-programs", "50"], "host_kv_blocks": ["--host-kv-blocks", "100"],
                   "kv_victim": ["--kv-victim", "arrival"]}


@pytest.mark.parametrize("dest", list(SWEEP_ONLY))
def test_sweep_options_are_refused_in_the_kv_mode(dest, capsys):
    argv = [a for a in KV if a not in ("--rates", "0.05")] + (["--rates", "0.05"] if dest != "sweep" else [])
    assert main([*argv, *SWEEP_ONLY_ARGV[dest]]) == 2
    err = capsys.readouterr().err
    assert SWEEP_ONLY[dest] in err and "not applied in the KV mode" in err, err


@pytest.mark.parametrize("dest", list(KV_ONLY))
def test_kv_options_are_refused_in_the_sweep(dest, capsys):
    assert main([*SWEEP, "--" + dest.replace("_", "-"), "2"]) == 2
    err = capsys.readouterr().err
    assert KV_ONLY[dest] in err and "not applied in the throughput sweep" in err, err


@pytest.mark.parametrize(("argv", "needle"), [
    (["--policies", "lottery"], "valid policies: fcfs-v0, fcfs, mlfq, plas, atlas, srpt"),
    (["--preset", "tpu-v9"], "valid presets: "),
    (["--workload", "nope"], "valid workloads: "),
    (["--max-num-seqs", "0"], "--max-num-seqs must be >= 1"),
    (["--num-blocks", "0"], "--num-blocks must be >= 1"),
    (["--kv-victim", "lifo"], "valid: policy, readmit, arrival"),
    (["--locality-threshold", "-1"], "--locality-threshold must be >= 0"),
])
def test_bad_names_and_limits_in_the_sweep(argv, needle, capsys):
    assert main([*SWEEP, *argv]) == 2
    assert needle in capsys.readouterr().err


def test_kv_mode_unknown_policy_lists_what_it_takes(capsys):
    assert main([*KV, "--policies", "fcfs-v0"]) == 2
    assert "the KV mode takes fcfs, mlfq, plas, atlas" in capsys.readouterr().err
