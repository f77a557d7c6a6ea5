"""Two API workers on one mesh keep each other's per-process caches filled (peer_notes.py): a fork
from a thread placed through the other worker, the output index and call counts. (A close reaches
every worker from the process table: test_session_closes.py.)"""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import openai

from tests.serving.api_replica import api_replica

TENANT = "acme"


def _body(content: str, max_tokens: int = 2) -> dict:
    return {"model": "autellix-lite", "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}


async def _until(check, what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_two_workers_share_threads_outputs_and_counts(stack):
    apps: list = []
    session = f"peers-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {stack.key(TENANT)}", "X-Session-Id": session}
    async with api_replica(stack, apps) as url_a, api_replica(stack, apps) as url_b, \
            httpx.AsyncClient(timeout=30, headers=headers) as http:
        a, b = (app.state.gateway for app in apps)
        first = await http.post(f"{url_a}/v1/chat/completions", json=_body("hello"))
        assert first.status_code == 200, first.text
        program_id = next(iter(a.session_threads._placed))
        await _until(lambda: b.completed_calls.get(program_id) == 1, "B never heard of A's answered call")
        text = first.json()["choices"][0]["message"]["content"]
        salt = a.salts.segment_salt(TENANT)  # the output index: B names A's answer as A's call did
        mine = a.outputs.segment_for("assistant", text, salt)
        assert mine[0].startswith("out:")  # the engine's name for that call's output KV
        await _until(lambda: b.outputs.segment_for("assistant", text, salt) == mine, "B never heard of A's answer")

        # a thread still running on A is a known parent on B
        client_a = openai.AsyncOpenAI(base_url=f"{url_a}/v1", api_key=stack.key(TENANT), max_retries=0)
        stream = await client_a.chat.completions.create(
            model="autellix-lite", max_tokens=150, stream=True, messages=[{"role": "user", "content": "long"}],
            extra_headers={"X-Session-Id": session, "X-Thread-Id": "t1", "X-Parent-Thread-Id": "main"})
        chunks = aiter(stream)
        await anext(chunks)
        await _until(lambda: b.session_threads.knows(program_id, "t1"), "B never heard of thread t1")
        fork = await http.post(f"{url_b}/v1/chat/completions", json=_body("fork"),
                               headers={"X-Thread-Id": "t2", "X-Parent-Thread-Id": "t1"})
        assert fork.status_code == 200, fork.text
        [_ async for _ in chunks]
        await stream.close()
