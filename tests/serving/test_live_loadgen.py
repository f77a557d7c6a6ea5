"""The live load generator against the stack: same programs and arrivals as the simulator, prompts
that the API counts and caches as the workload says, and a simulator-shaped point."""

from __future__ import annotations

from loadgen.live.prompts import call_messages, segment_text
from loadgen.live.run import LiveRunConfig, programs_for, run_live
from loadgen.workloads.arrivals import poisson_arrivals
from loadgen.workloads.registry import make_programs
from services.session_api.tokens import estimate_tokens


def test_programs_and_arrivals_match_the_simulators():
    config = LiveRunConfig(url="http://x", api_key="k", workload="react", rates=[2.0], num_programs=5, seed=3)
    programs = programs_for(config, 2.0)
    assert [p.arrival_s for p in programs] == poisson_arrivals(2.0, 5, 3)
    assert [p.calls for p in programs] == [p.calls for p in make_programs("react", 5, 3)]
    windowed = programs_for(LiveRunConfig("http://x", "k", "react", [2.0], duration_s=10.0, seed=3), 2.0)
    assert windowed and all(p.arrival_s <= 10.0 for p in windowed)


def test_messages_carry_each_segment_as_its_token_count():
    program = make_programs("mapreduce", 1, 0)[0]
    reduce_call = program.calls[-1]
    outputs = {c.call_id: segment_text(c.call_id, c.output_tokens) for c in program.calls[:-1]}
    messages = call_messages(reduce_call, outputs)
    assert [estimate_tokens(m["content"]) for m in messages] == [n for _, n in reduce_call.prompt_segments]
    assert sum(m["role"] == "assistant" for m in messages) == len(program.calls) - 1


async def test_live_run_completes_and_reports_like_the_simulator(stack):
    config = LiveRunConfig(url=stack.base_url, api_key=stack.key("acme"), workload="react", rates=[4.0],
                           num_programs=2, seed=0, drain_timeout_s=60)
    result = await run_live(config)
    point = result["policies"]["live"]["points"][0]
    assert point["completed_programs"] == 2 and point["all_finished"]
    assert point["num_calls"] == sum(len(p.calls) for p in programs_for(config, 4.0))
    for key in ("rate", "completed_per_s", "mean_norm_latency_s", "p95_norm_latency_s", "p99_norm_latency_s"):
        assert point[key] is not None and point[key] > 0
