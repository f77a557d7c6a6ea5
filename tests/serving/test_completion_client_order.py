"""Each engine's CallCompleted carries the call's `completed_calls_before`, as the API sent it: the
process table folds a program's completions in that order (services/process_table/client_order.py)."""

from __future__ import annotations

import asyncio

import httpx

from shared.protocol import messages as m
from shared.protocol import subjects


async def test_completions_carry_the_count_of_calls_the_client_had_seen_complete(stack, bus):
    headers = {"Authorization": f"Bearer {stack.key('acme')}"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=10.0) as http:
        session_id = (await http.post("/v1/sessions")).json()["id"]
        seen: list[m.CallCompleted] = []

        async def on_completion(msg) -> None:
            if msg.body.program_id == session_id:
                seen.append(msg.body)
        sub = await bus.subscribe(subjects.all_completions(), on_completion, types=(m.CallCompleted,))
        try:
            for k in range(3):  # one after another, as an agent's steps
                resp = await http.post("/v1/chat/completions", json={
                    "model": "autellix-lite", "max_tokens": 4, "session_id": session_id,
                    "messages": [{"role": "user", "content": f"step {k}"}]})
                assert resp.status_code == 200, resp.text
            for _ in range(200):
                if len(seen) == 3:
                    break
                await asyncio.sleep(0.02)
        finally:
            await sub.unsubscribe()
    assert sorted(c.completed_calls_before for c in seen) == [0, 1, 2]
