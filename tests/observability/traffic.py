"""A few calls through the official openai client: a session of several calls (then closed), a
streamed one-call program, and a refused call (an unknown model: 404 before any token)."""

from __future__ import annotations

import asyncio

import httpx
import openai


async def served_model(client: openai.AsyncOpenAI) -> str:
    for _ in range(100):  # the API learns the served models from the engines' heartbeats
        served = (await client.models.list()).data
        if served:
            return served[0].id
        await asyncio.sleep(0.1)
    raise AssertionError("no model served")


async def open_session(base_url: str, api_key: str, name: str) -> str:
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}) as http:
        opened = await http.post("/v1/sessions", json={"name": name})
        assert opened.status_code == 201, opened.text
        body = opened.json()
        return body.get("id") or body["session_id"]


async def close_session(base_url: str, api_key: str, session_id: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}) as http:
        closed = await http.delete(f"/v1/sessions/{session_id}")
        assert closed.status_code == 200, closed.text


async def session_calls(client: openai.AsyncOpenAI, model: str, session_id: str, calls: int,
                        max_tokens: int = 8) -> None:
    for _ in range(calls):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "plan the next step"}],
                                             max_tokens=max_tokens, extra_headers={"X-Session-Id": session_id})


async def drive(base_url: str, api_key: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=api_key, max_retries=0)
    model = await served_model(client)
    session_id = await open_session(base_url, api_key, "observability")
    await session_calls(client, model, session_id, calls=3)
    stream = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                                  max_tokens=16, stream=True)
    async for _ in stream:
        pass
    try:
        await client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}],
                                             max_tokens=4)
    except openai.NotFoundError:
        pass
    else:
        raise AssertionError("an unknown model was served")
    await close_session(base_url, api_key, session_id)
