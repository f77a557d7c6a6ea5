"""Graceful drain (what SIGTERM runs in an engine agent, services/engine_agent/drain.py) on the real
stack: a stream in flight on the draining engine runs to its last token, calls made meanwhile go to
the other engine, and the drain ends with nothing cut."""

from __future__ import annotations

import asyncio

import openai

from runtime.nats_server import NatsServer
from services.engine_agent.drain import drain_calls
from tests.serving.stack import start_stack

LONG_TOKENS = 150


async def test_a_draining_engine_finishes_its_stream_and_takes_no_new_call(tmp_path, postgres_server,
                                                                            _migrated_template):
    # a NATS of its own: the session's shared stack would otherwise see these engines (and its
    # router take these calls) on the common heartbeat and route subjects
    nats = NatsServer(tmp_path / "nats").start()
    stack = await start_stack(nats.url, postgres_server.create_database(template=_migrated_template))
    try:
        client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
        stream = await client.chat.completions.create(
            model="autellix-lite", max_tokens=LONG_TOKENS, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "a long answer"}], extra_headers={"X-Session-Id": "drain-long"})
        chunks = aiter(stream)
        first = await anext(chunks)
        holder = next(e for e, running in stack.agents.items() if running.agent.calls)
        other = next(e for e in stack.engine_ids if e != holder)
        done_before = {e: stack.agents[e].agent.num_completed for e in stack.engine_ids}
        drain = asyncio.create_task(drain_calls(stack.agents[holder].agent, timeout_s=60, heartbeat_interval_s=0.25))
        await asyncio.sleep(0.3)  # the router has the draining heartbeat

        for i in range(4):  # the same session too: its primary engine is draining, so it moves
            answer = await client.chat.completions.create(
                model="autellix-lite", max_tokens=4, messages=[{"role": "user", "content": f"meanwhile {i}"}],
                extra_headers={"X-Session-Id": "drain-long" if i == 0 else f"drain-new-{i}"})
            assert answer.choices[0].finish_reason

        rest = [c async for c in chunks]
        finish = [c.choices[0].finish_reason for c in [first, *rest] if c.choices and c.choices[0].finish_reason]
        assert finish == ["length"]
        usage = next(c.usage for c in rest if c.usage is not None)
        assert usage.completion_tokens == LONG_TOKENS
        assert await drain == 0  # nothing was still running at the deadline
        assert stack.agents[holder].agent.num_completed - done_before[holder] == 1  # only the stream
        assert stack.agents[other].agent.num_completed - done_before[other] == 4
    finally:
        await stack.stop()
        nats.stop()
