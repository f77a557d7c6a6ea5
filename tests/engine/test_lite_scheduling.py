"""Scenario tests that pin the lite engine's behaviour (prefix cache, policies, v0/v1, preemption)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory, EngineCall, output_segment_id
from shared.engine.lite import LiteEngine, LiteEngineConfig
from tests.engine.drive import Chain, drive


def make(policy: str = "plas", **cfg) -> tuple[LiteEngine, DictProgramDirectory]:
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", SchedulingPolicy(PolicyName(policy)), directory, LiteEngineConfig(**cfg))
    return engine, directory


def call(cid: str, segs: tuple, out: int, t: float = 0.0, seq: int = 0, pid: str | None = None) -> EngineCall:
    return EngineCall(cid, pid or cid.split("/")[0], "main", segs, out, t, t, seq)


def run_to_end(engine: LiteEngine, now: float = 0.0, max_steps: int = 100_000):
    reports = []
    for _ in range(max_steps):
        rep = engine.step(now)
        if rep is None:
            return reports, now
        reports.append(rep)
        now += rep.duration_s
    raise AssertionError("did not drain")


def test_second_call_of_a_program_hits_the_history_and_output_in_the_prefix_cache():
    engine, _ = make()
    c1 = call("p/c0", (("sys", 1000), ("u1", 200)), 100)
    engine.submit(c1, 0.0)
    reports, now = run_to_end(engine)
    done = [f for r in reports for f in r.finished]
    assert done[0].prefix_hit_tokens == 0 and done[0].output_tokens == 100
    segs2 = c1.prompt_segments + ((output_segment_id("p/c0"), 100), ("u2", 50))
    # call 1 computed 1200 prompt + 99 output tokens: 81 full blocks are cached, outputs included
    assert engine.primary_hit_tokens(segs2) == 81 * 16
    engine.submit(call("p/c1", segs2, 10, now, 1), now)
    reports, _ = run_to_end(engine, now)
    second = [f for r in reports for f in r.finished][0]
    assert second.prefix_hit_tokens == 81 * 16
    assert second.prompt_tokens == 1350


def test_siblings_admitted_in_one_step_share_the_prefix_their_first_is_computing():
    """As vLLM's allocate_slots: blocks are cached when scheduled, so the second of two identical
    prompts admitted in the same step hits the first's blocks (an MCTS expansion)."""
    engine, _ = make()
    segs = (("tree", 1000), ("node", 200))
    engine.submit(call("p/a", segs, 10, seq=0), 0.0)
    engine.submit(call("p/b", segs, 10, seq=1), 0.0)
    reports, _ = run_to_end(engine)
    hits = {f.call_id: f.prefix_hit_tokens for r in reports for f in r.finished}
    assert hits == {"p/a": 0, "p/b": (1200 - 1) // 16 * 16}


def test_no_prefix_hits_when_caching_is_off():
    engine, _ = make(prefix_caching=False)
    res = drive(engine, DictProgramDirectory(), [Chain("p", 0.0, [(500, 20), (50, 20)], system_tokens=500)])
    assert all(c.prefix_hit_tokens == 0 for c in res.completions.values())


def _short_vs_long(policy: str):
    engine, directory = make(policy, max_num_seqs=1, token_budget=8192)
    long_prog = Chain("long", 0.0, [(64, 150), (64, 150), (64, 150)])
    short_prog = Chain("short", 3.6, [(64, 20)])  # arrives while the long program's third call runs
    return drive(engine, directory, [long_prog, short_prog])


def test_short_program_overtakes_long_one_under_plas_not_fcfs():
    plas = _short_vs_long("plas")
    fcfs = _short_vs_long("fcfs")
    # the long program's third call starts before the short one arrives in both runs
    assert plas.completions["long/c1"].finish_s < 3.6 and fcfs.completions["long/c1"].finish_s < 3.6
    assert plas.program_finish_s["short"] < plas.program_finish_s["long"]
    assert plas.completions["long/c2"].preemptions == 1
    assert fcfs.program_finish_s["short"] > fcfs.program_finish_s["long"]
    assert fcfs.completions["long/c2"].preemptions == 0
    assert plas.program_finish_s["short"] - 3.6 < 0.5 * (fcfs.program_finish_s["short"] - 3.6)


def test_demotion_of_a_long_call_lets_a_new_call_preempt_it():
    engine, directory = make("mlfq", max_num_seqs=1)
    res = drive(engine, directory, [Chain("a", 0.0, [(64, 300)]), Chain("b", 2.0, [(64, 20)])])
    assert res.completions["a/c0"].preemptions == 1
    assert res.completions["b/c0"].finish_s < res.completions["a/c0"].finish_s
    # before the demotion (attained < q0 = 1 s) a new call of the same level does not preempt
    engine, directory = make("mlfq", max_num_seqs=1)
    res = drive(engine, directory, [Chain("a", 0.0, [(64, 300)]), Chain("b", 0.3, [(64, 20)])])
    assert res.completions["a/c0"].preemptions == 1  # preempted only after its demotion at 1 s
    preempt_step = next(r for r in res.reports if r.preempted)
    assert preempt_step is not None


def test_v1_mixes_chunked_prefill_with_decodes_and_v0_stalls_them():
    for mode in ("v1", "v0"):
        engine, _ = make("fcfs", mode=mode)
        engine.submit(call("a/c0", (("a", 100),), 200), 0.0)
        now = 0.0
        for _ in range(5):
            now += engine.step(now).duration_s
        engine.submit(call("b/c0", (("b", 20_000),), 5, now, 1), now)
        rep = engine.step(now)
        if mode == "v1":
            assert rep.num_running == 2 and rep.tokens_emitted == {"a/c0": 1}
            assert rep.num_scheduled_tokens == 8192  # one decode + an 8191-token chunk
            steps = 1
            while "b/c0" not in rep.tokens_emitted:
                now += rep.duration_s
                rep = engine.step(now)
                steps += 1
            assert steps == 3  # 20,000 tokens in chunks of the 8192-token budget
        else:
            assert rep.num_running == 1 and rep.tokens_emitted == {"b/c0": 1}  # decodes stalled
            assert rep.num_scheduled_tokens == 20_000  # whole prefill, in a step of its own


def test_v0_prefill_step_takes_longer_than_decoders_wait_in_v1():
    """The call-level head-of-line blocking of the paper's baseline: decoders stall for whole prefills."""
    gaps = {}
    for mode in ("v0", "v1"):
        engine, _ = make("fcfs", mode=mode)
        engine.submit(call("a/c0", (("a", 100),), 300), 0.0)
        for i in range(6):
            engine.submit(call(f"p{i}/c0", ((f"p{i}", 6000),), 2, 0.5, i + 1), 0.5)
        reports, _ = run_to_end(engine)
        t, last, worst = 0.0, None, 0.0
        for r in reports:
            t += r.duration_s
            if "a/c0" in r.tokens_emitted:
                if last is not None:
                    worst = max(worst, t - last)
                last = t
        gaps[mode] = worst
    assert gaps["v0"] > gaps["v1"]


def _kv_pressure(preemption: str, batched: bool = False, caching: bool = True):
    # 3 calls whose contexts outgrow 120 blocks (1920 tokens) together
    engine, directory = make("fcfs", num_blocks=120, preemption=preemption, batched_swap=batched,
                             prefix_caching=caching)
    for i in range(3):
        engine.submit(call(f"p{i}/c0", ((f"p{i}", 300),), 400, 0.0, i), 0.0)
    reports, end = run_to_end(engine)
    done = {f.call_id: f for r in reports for f in r.finished}
    return engine, done, end


def test_recompute_vs_swap_preemption_costs():
    eng_r, done_r, _ = _kv_pressure("recompute", caching=False)
    assert eng_r.stats["preemptions"] >= 1 and eng_r.stats["swaps"] == 0
    assert sum(d.recomputed_tokens for d in done_r.values()) > 0
    eng_c, done_c, _ = _kv_pressure("recompute", caching=True)
    # vLLM V1: freed full blocks stay cached, so resuming recomputes less
    assert sum(d.recomputed_tokens for d in done_c.values()) < sum(d.recomputed_tokens for d in done_r.values())
    eng_s, done_s, end_s = _kv_pressure("swap")
    assert eng_s.stats["swaps"] >= 1
    assert sum(d.recomputed_tokens for d in done_s.values()) == 0
    eng_b, done_b, end_b = _kv_pressure("swap", batched=True)
    assert eng_b.stats["swaps"] == eng_s.stats["swaps"]
    assert end_b < end_s  # batched transfers remove most per-copy cost
    for done in (done_r, done_c, done_s, done_b):
        assert all(d.output_tokens == 400 for d in done.values())


def test_swap_adds_its_transfer_time_to_the_step():
    engine, _ = make("fcfs", num_blocks=120, preemption="swap")
    for i in range(3):
        engine.submit(call(f"p{i}/c0", ((f"p{i}", 300),), 400, 0.0, i), 0.0)
    now = 0.0
    while True:
        rep = engine.step(now)
        now += rep.duration_s
        if rep.preempted:
            break
    cm = engine.cost
    base = cm.linear_s(rep.num_scheduled_tokens)
    assert rep.duration_s > base + cm.swap_s(1)


def test_anti_starvation_promotes_a_program_that_waits_too_long():
    def run(beta):
        engine, directory = make("plas", max_num_seqs=1, starvation=StarvationConfig(beta=beta))
        directory.ledger("old").service_s = 5.0  # a program that has had lots of service
        chains = [Chain("old", 0.0, [(64, 50)])]
        # fresh short programs keep the one-slot engine busy: the old program starves without beta
        chains += [Chain(f"s{i}", 0.02 + 0.4 * i, [(64, 40)]) for i in range(60)]
        res = drive(engine, directory, chains)
        promoted = [p for r in res.reports for p in r.promoted_programs]
        return res, promoted

    res, promoted = run(2.0)
    assert "old" in promoted
    last_short = max(v for k, v in res.program_finish_s.items() if k != "old")
    assert res.program_finish_s["old"] < last_short - 5
    res_none, promoted_none = run(None)
    assert promoted_none == []
    assert res.program_finish_s["old"] < res_none.program_finish_s["old"] - 5


def test_determinism_same_input_same_completions():
    def run():
        engine, directory = make("atlas", num_blocks=400, max_num_seqs=8, preemption="recompute")
        chains = [Chain(f"p{i}", 0.1 * i, [(100 + 37 * i % 300, 30 + 11 * i % 90)] * (1 + i % 4),
                        system_tokens=200) for i in range(20)]
        res = drive(engine, directory, chains)
        return [(c.call_id, c.finish_s, c.service_s, c.preemptions, c.prefix_hit_tokens)
                for c in sorted(res.completions.values(), key=lambda c: c.call_id)]
    assert run() == run()


def test_account_fields_and_step_report():
    engine, directory = make("plas")
    res = drive(engine, directory, [Chain("p", 0.0, [(300, 40), (20, 40)], system_tokens=100)])
    first, second = res.completions["p/c0"], res.completions["p/c1"]
    assert first.output_tokens == 40 and first.first_token_s < first.finish_s
    assert first.service_s == pytest.approx(first.finish_s - 0.0)  # alone: never waited
    assert first.wait_s == pytest.approx(0.0, abs=1e-9)
    assert second.thread_service_at_submit_s == pytest.approx(first.service_s)
    assert second.submit_epoch == 0
    emitted = sum(r.tokens_emitted.get("p/c0", 0) for r in res.reports)
    assert emitted == 40
    assert all(r.kv_total_blocks == 27_500 for r in res.reports)


def test_bad_input():
    with pytest.raises(ValueError, match="valid"):
        LiteEngineConfig(mode="v2")
    with pytest.raises(ValueError, match="valid"):
        LiteEngineConfig(preemption="teleport")
    with pytest.raises(ValueError, match="llama3.1-8b-a100"):
        LiteEngineConfig(preset="nope")
    engine, _ = make(num_blocks=10)
    with pytest.raises(ValueError, match="KV blocks"):
        engine.submit(call("x/c0", (("x", 500),), 10), 0.0)
    assert replace(LiteEngineConfig(), token_budget=512).token_budget == 512


def test_kv_blocked_better_class_preempts_under_plas_not_fcfs():
    def run(policy):
        # 100 blocks = 1600 tokens: the long call fills most of it, the newcomer cannot fit beside it
        engine, directory = make(policy, num_blocks=100)
        directory.ledger("big").service_s = 8.0  # a program with lots of attained service (level 4)
        res = drive(engine, directory, [Chain("big", 0.0, [(1000, 400)]), Chain("new", 1.0, [(700, 20)])])
        return res

    plas, fcfs = run("plas"), run("fcfs")
    assert plas.completions["big/c0"].preemptions >= 1
    assert plas.completions["new/c0"].finish_s < plas.completions["big/c0"].finish_s
    assert fcfs.completions["big/c0"].preemptions == 0
    assert fcfs.completions["new/c0"].finish_s > fcfs.completions["big/c0"].finish_s


def test_full_swap_space_falls_back_to_recompute():
    engine, _ = make("fcfs", num_blocks=120, preemption="swap", swap_space_blocks=0, prefix_caching=False)
    for i in range(3):
        engine.submit(call(f"p{i}/c0", ((f"p{i}", 300),), 400, 0.0, i), 0.0)
    reports, _ = run_to_end(engine)
    assert engine.stats["preemptions"] >= 1 and engine.stats["swaps"] == 0
    assert engine.stats["recomputed_tokens"] > 0


def test_abort_frees_everything_and_load_tracks_remaining_work():
    engine, _ = make()
    engine.submit(call("a/c0", (("a", 1000),), 50), 0.0)
    engine.submit(call("b/c0", (("b", 500),), 50, 0.0, 1), 0.0)
    assert engine.load() == 1000 + 50 + 500 + 50
    rep = engine.step(0.0)
    assert engine.load() == 1600 - rep.num_scheduled_tokens
    assert engine.abort("a/c0") and not engine.abort("a/c0")
    assert engine.load() == 550 - 500
    assert engine.abort("b/c0")
    assert engine.pool.num_used == 0 and not engine.has_work() and engine.step(1.0) is None


def test_step_times_integrate_the_cost_model_over_whole_contexts():
    engine, _ = make("fcfs")
    engine.submit(call("a/c0", (("a", 1000),), 10), 0.0)
    reports, end = run_to_end(engine)
    cm = engine.cost
    expected = cm.linear_s(1000) + cm.prefill_attention_s(1000, 1000)
    expected += sum(cm.linear_s(1) + cm.decode_attention_s(1000 + k + 1) for k in range(9))
    assert len(reports) == 10
    assert end == pytest.approx(expected, rel=1e-9)
    done = reports[-1].finished[0]
    assert done.service_s == pytest.approx(expected, rel=1e-9)
    assert done.first_token_s == pytest.approx(reports[0].duration_s)


def test_atlas_runs_the_critical_path_thread_first_within_a_program():
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", SchedulingPolicy(PolicyName.ATLAS), directory, LiteEngineConfig(max_num_seqs=1))
    led = directory.ledger("p")
    led.thread_service_s.update({"short": 0.2, "long": 0.9})  # both under q0: same level
    blocker = EngineCall("x/c0", "x", "main", (("x", 64),), 30, 0.0, 0.0, 0)
    engine.submit(blocker, 0.0)
    engine.step(0.0)  # the blocker holds the only slot
    first = EngineCall("p/a", "p", "short", (("pa", 64),), 5, 0.01, 0.0, 1)
    second = EngineCall("p/b", "p", "long", (("pb", 64),), 5, 0.02, 0.0, 2)
    engine.submit(first, 0.01)
    engine.submit(second, 0.02)
    reports, _ = run_to_end(engine, 0.02)
    order = [f.call_id for r in reports for f in r.finished]
    assert order == ["x/c0", "p/b", "p/a"]  # larger s_T (critical path) first despite arriving later


def test_lite_and_the_vllm_class_share_one_scheduling_state_and_its_settings():
    """The lite engine decides through ProgramScheduleState with the vLLM class's own defaults."""
    from shared.engine.program_sched import ProgramScheduleState, SchedulerSettings

    engine = LiteEngine("e0", SchedulingPolicy(PolicyName.ATLAS), DictProgramDirectory(), LiteEngineConfig())
    assert isinstance(engine.sched, ProgramScheduleState)
    ours, theirs = engine.sched.settings, SchedulerSettings(SchedulingPolicy(PolicyName.ATLAS))
    assert ours == theirs  # policy, starvation, quantum, per-decision cap, refresh and check intervals
