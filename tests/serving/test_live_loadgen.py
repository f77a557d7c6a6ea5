"""The live load generator against the stack: same programs and arrivals as the simulator, prompts
that the API counts and caches as the workload says, and a simulator-shaped point."""

from __future__ import annotations

from sqlalchemy import text

from loadgen.live.prompts import call_messages, segment_text
from loadgen.live.run import LiveRunConfig, programs_for, run_live
from loadgen.workloads.arrivals import poisson_arrivals
from loadgen.workloads.registry import make_programs
from runtime.nats_server import NatsServer
from services.process_table.db import create_engine
from services.session_api.tokens import estimate_tokens
from tests.serving.stack import start_stack


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


async def test_with_size_hints_each_session_s_first_hint_is_its_call_count(tmp_path, postgres_server,
                                                                         _migrated_template):
    # a NATS of its own: on the shared one, the shared stack's process table would answer some of
    # these sessions' requests from its own database
    nats = NatsServer(tmp_path / "nats").start()
    database_url = postgres_server.create_database(template=_migrated_template)
    stack = await start_stack(nats.url, database_url, policy="serpt")
    try:
        config = LiveRunConfig(url=stack.base_url, api_key=stack.key("acme"), workload="react", rates=[4.0],
                               num_programs=3, seed=0, drain_timeout_s=60, size_hints=True)
        result = await run_live(config)
        assert result["policies"]["live"]["points"][0]["all_finished"]
        engine = create_engine(database_url)
        try:
            async with engine.connect() as conn:
                stored = (await conn.execute(text(
                    "SELECT hint_calls FROM programs WHERE hint_calls IS NOT NULL"))).scalars().all()
        finally:
            await engine.dispose()
        assert sorted(stored) == sorted(len(p.calls) for p in programs_for(config, 4.0))
    finally:
        await stack.stop()
        nats.stop()
