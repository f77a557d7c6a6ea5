"""SERPT on the live mesh: closed sessions of a tenant's workload class teach the table a size, a
new session of that class shows its expected remaining service, and calls carrying it are served."""

from __future__ import annotations

import asyncio

import httpx
import openai

from runtime.nats_server import NatsServer
from shared.core.size_estimator import SizeEstimatorConfig
from tests.serving.stack import start_stack

MIN_SAMPLES = SizeEstimatorConfig().min_samples


async def test_closed_sessions_teach_the_expected_size_of_their_class(tmp_path, postgres_server, _migrated_template):
    # a NATS of its own: on the session's shared one, the shared stack's process table would answer
    # some of these session requests from its own database (one queue group per subject)
    nats = NatsServer(tmp_path / "nats").start()
    stack = await start_stack(nats.url, postgres_server.create_database(template=_migrated_template), policy="serpt")
    try:
        headers = {"Authorization": f"Bearer {stack.key('acme')}"}
        client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
        async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=30) as http:
            async def session(workload: str) -> str:
                opened = await http.post("/v1/sessions", json={"workload_class": workload})
                assert opened.status_code == 201, opened.text
                return opened.json()["id"]

            for i in range(MIN_SAMPLES):
                sid = await session("triage")
                answer = await client.chat.completions.create(
                    model="autellix-lite", max_tokens=8, messages=[{"role": "user", "content": f"case {i}"}],
                    extra_headers={"X-Session-Id": sid})
                assert answer.choices[0].finish_reason
                for _ in range(100):  # its completion is folded before the close
                    if (await http.get(f"/v1/sessions/{sid}")).json()["num_calls"] == 1:
                        break
                    await asyncio.sleep(0.05)
                assert (await http.delete(f"/v1/sessions/{sid}")).status_code == 200

            fresh = await session("triage")
            view = (await http.get(f"/v1/sessions/{fresh}")).json()
            assert view["expected_remaining_s"] is not None and view["expected_remaining_s"] > 0
            other = (await http.get(f"/v1/sessions/{await session('research')}")).json()
            assert other["expected_remaining_s"] is None  # another class has learned nothing
            answer = await client.chat.completions.create(
                model="autellix-lite", max_tokens=4, messages=[{"role": "user", "content": "next"}],
                extra_headers={"X-Session-Id": fresh})
            assert answer.choices[0].finish_reason
    finally:
        await stack.stop()
        nats.stop()
