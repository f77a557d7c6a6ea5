"""Sessions as agent clients send them (issue 12, item 2), against the whole stack: client-chosen
ids under every accepted header and field, opened on first use and kept apart per tenant, the
final-call header, `POST /v1/sessions` with an id, and the 400s for bad ids."""

from __future__ import annotations

import asyncio
import uuid
from urllib.parse import quote

import httpx
import pytest

from tests.serving.api_replica import api_replica

MODEL = "autellix-lite"


def _call(**body) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "plan the next step"}], "max_tokens": 3,
            **body}


def _http(stack, tenant: str = "acme", base_url: str | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url or stack.base_url, timeout=30,
                             headers={"Authorization": f"Bearer {stack.key(tenant)}"})


def _new_id(tag: str) -> str:
    return f"{tag}-{uuid.uuid4()}"


async def _view(http: httpx.AsyncClient, session_id: str) -> httpx.Response:
    return await http.get(f"/v1/sessions/{session_id}")


async def _wait_for_calls(http: httpx.AsyncClient, session_id: str, num_calls: int, timeout_s: float = 10) -> dict:
    """Completions reach the process table asynchronously: poll the session's view."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        resp = await _view(http, session_id)
        assert resp.status_code == 200, resp.text
        if resp.json()["num_calls"] >= num_calls:
            return resp.json()
        assert asyncio.get_running_loop().time() < deadline, resp.json()
        await asyncio.sleep(0.05)


# (how the id is sent): every name `services/session_api/session_names.py` accepts
NAMED_BY = {
    "body session_id": lambda sid: ({"session_id": sid}, {}),
    "header X-Session-Id": lambda sid: ({}, {"X-Session-Id": sid}),
    "header X-Session-ID (vLLM)": lambda sid: ({}, {"X-Session-ID": sid}),
    "body vllm_xargs.session_id": lambda sid: ({"vllm_xargs": {"session_id": sid}}, {}),
    "header X-Dynamo-Session-Id": lambda sid: ({}, {"X-Dynamo-Session-Id": sid}),
    "header x-claude-code-session-id": lambda sid: ({}, {"x-claude-code-session-id": sid}),
    "header session_id (Codex)": lambda sid: ({}, {"session_id": sid}),
    "header session-id (Codex)": lambda sid: ({}, {"session-id": sid}),
    "body litellm_session_id": lambda sid: ({"litellm_session_id": sid}, {}),
    "header x-litellm-session-id": lambda sid: ({}, {"x-litellm-session-id": sid}),
}


@pytest.mark.parametrize("named_by", list(NAMED_BY))
async def test_a_client_id_opens_its_session_on_first_use_under_every_name(stack, named_by):
    session_id = _new_id("agent")
    body, headers = NAMED_BY[named_by](session_id)
    async with _http(stack) as http:
        assert (await _view(http, session_id)).status_code == 404  # nothing before its first call
        for _ in range(2):
            resp = await http.post("/v1/chat/completions", json=_call(**body), headers=headers)
            assert resp.status_code == 200, resp.text
            assert resp.json()["session_id"] == session_id  # the client's own id, never the program id
        view = await _wait_for_calls(http, session_id, 2)
    assert view["id"] == session_id and view["status"] == "open" and view["num_calls"] == 2


async def test_the_first_name_present_wins(stack):
    ids = {name: _new_id(name) for name in ("body", "header", "xargs", "dynamo", "litellm")}
    async with _http(stack) as http:
        both = await http.post("/v1/chat/completions", json=_call(session_id=ids["body"]),
                               headers={"X-Session-Id": ids["header"]})
        header_first = await http.post("/v1/chat/completions", json=_call(vllm_xargs={"session_id": ids["xargs"]}),
                                       headers={"X-Session-Id": ids["header"], "X-Dynamo-Session-Id": ids["dynamo"]})
        dynamo_first = await http.post("/v1/chat/completions", json=_call(litellm_session_id=ids["litellm"]),
                                       headers={"X-Dynamo-Session-Id": ids["dynamo"]})
        assert [r.json()["session_id"] for r in (both, header_first, dynamo_first)] == [
            ids["body"], ids["header"], ids["dynamo"]]
        assert (await _wait_for_calls(http, ids["header"], 1))["num_calls"] == 1
        for unused in ("xargs", "litellm"):
            assert (await _view(http, ids[unused])).status_code == 404  # a losing name opened nothing


async def test_the_same_client_id_in_two_tenants_is_two_sessions(stack):
    session_id = _new_id("shared")
    async with _http(stack, "acme") as acme, _http(stack, "globex") as globex:
        for _ in range(2):
            assert (await acme.post("/v1/chat/completions", json=_call(session_id=session_id))).status_code == 200
        assert (await _view(globex, session_id)).status_code == 404  # acme's is not revealed
        assert (await globex.post("/v1/chat/completions", json=_call(session_id=session_id))).status_code == 200
        assert (await _wait_for_calls(acme, session_id, 2))["num_calls"] == 2
        assert (await _wait_for_calls(globex, session_id, 1))["num_calls"] == 1
        assert (await acme.delete(f"/v1/sessions/{session_id}")).json()["status"] == "closed"
        assert (await _view(globex, session_id)).json()["status"] == "open"  # globex's is untouched
        assert (await globex.post("/v1/chat/completions", json=_call(session_id=session_id))).status_code == 200


async def test_concurrent_first_calls_all_succeed_in_one_session(stack):
    session_id = _new_id("burst")
    async with _http(stack) as http:
        answers = await asyncio.gather(*(
            http.post("/v1/chat/completions", json=_call(), headers={"X-Session-Id": session_id})
            for _ in range(8)))
        assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers if a.status_code != 200]
        assert (await _wait_for_calls(http, session_id, 8))["num_calls"] == 8


async def test_ids_with_any_visible_character_are_read_and_closed_by_path(stack):
    session_id = f"team/a?b#c%d:{uuid.uuid4()}"
    path = "/v1/sessions/" + quote(session_id, safe="/")
    async with _http(stack) as http:
        assert (await http.post("/v1/chat/completions", json=_call(), headers={"X-Session-Id": session_id})
                ).json()["session_id"] == session_id
        assert (await _wait_for_calls(http, quote(session_id, safe="/"), 1))["id"] == session_id
        closed = await http.delete(path)
    assert closed.status_code == 200 and closed.json() == {**closed.json(), "id": session_id, "status": "closed"}


async def test_a_closed_client_session_stays_closed(stack):
    session_id = _new_id("done")
    async with _http(stack) as http:
        assert (await http.post("/v1/chat/completions", json=_call(session_id=session_id))).status_code == 200
        assert (await http.delete(f"/v1/sessions/{session_id}")).json()["status"] == "closed"
        again = await http.post("/v1/chat/completions", json=_call(session_id=session_id))
    assert again.status_code == 409 and again.json()["error"]["code"] == "session_ended"


@pytest.mark.parametrize("final_header, stream", [("X-Session-Final", False), ("X-Dynamo-Session-Final", True)])
async def test_the_final_header_closes_the_session_after_its_answer(stack, final_header, stream):
    session_id = _new_id("final")
    headers = {"X-Session-Id": session_id}
    async with _http(stack) as http:
        assert (await http.post("/v1/chat/completions", json=_call(), headers=headers)).status_code == 200
        refused = await http.post("/v1/chat/completions", json=_call(max_tokens=10**9),
                                  headers={**headers, final_header: "true"})
        assert refused.status_code == 400  # refused before it ran: no answer, so the session stays open
        last = await http.post("/v1/chat/completions", json=_call(stream=stream),
                               headers={**headers, final_header: "true"})
        assert last.status_code == 200
        if stream:
            assert last.text.rstrip().endswith("data: [DONE]")
        deadline = asyncio.get_running_loop().time() + 10
        while (view := (await _view(http, session_id)).json())["status"] != "closed":  # streams close after [DONE]
            assert asyncio.get_running_loop().time() < deadline, view
            await asyncio.sleep(0.05)
        # the final call's completion lands after the close, and is still counted (process table)
        assert (await _wait_for_calls(http, session_id, 2))["num_calls"] == 2
        after = await http.post("/v1/chat/completions", json=_call(), headers=headers)
    assert after.status_code == 409 and after.json()["error"]["code"] == "session_ended"


async def test_post_sessions_with_a_client_id(stack):
    session_id = _new_id("posted")
    async with _http(stack) as http:
        created = await http.post("/v1/sessions", json={"id": session_id, "name": "triage"})
        assert created.status_code == 201, created.text
        assert created.json()["id"] == session_id and created.json()["name"] == "triage"
        again = await http.post("/v1/sessions", json={"id": session_id, "name": "ignored"})
        assert again.status_code == 200 and again.json()["name"] == "triage"  # idempotent: the existing one
        called = await http.post("/v1/chat/completions", json=_call(), headers={"X-Session-Id": session_id})
        assert called.json()["session_id"] == session_id
        assert (await _wait_for_calls(http, session_id, 1))["num_calls"] == 1
        assert (await http.delete(f"/v1/sessions/{session_id}")).status_code == 200
        closed = await http.post("/v1/sessions", json={"id": session_id})
        assert closed.status_code == 409 and closed.json()["error"]["code"] == "session_ended"
        issued = (await http.post("/v1/sessions")).json()["id"]
        assert (await http.post("/v1/sessions", json={"id": issued})).status_code == 200
        never_issued = await http.post("/v1/sessions", json={"id": "s-" + "0" * 32})
        assert never_issued.status_code == 404  # an id of the API's own form must have been issued


def _assert_invalid(resp: httpx.Response, param: str, rule: str) -> None:
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_value" and error["param"] == param and rule in error["message"], error


async def test_bad_session_ids_are_400s_naming_the_field_and_the_rule(stack):
    too_long = "x" * 129
    async with _http(stack) as http:
        ok = await http.post("/v1/chat/completions", json=_call(session_id="y" * 128))
        assert ok.status_code == 200 and ok.json()["session_id"] == "y" * 128
        _assert_invalid(await http.post("/v1/chat/completions", json=_call(session_id=too_long)), "session_id",
                        "at most 128")
        _assert_invalid(await http.post("/v1/chat/completions", json=_call(), headers={"X-Session-Id": too_long}),
                        "X-Session-Id", "at most 128")
        _assert_invalid(await http.post("/v1/chat/completions", json=_call(),
                                        headers={"x-claude-code-session-id": "two words"}),
                        "x-claude-code-session-id", "visible ASCII")
        for bad in ("tab\there", "nul\x00", "caf\u00e9", "line\nbreak"):
            _assert_invalid(await http.post("/v1/chat/completions", json=_call(litellm_session_id=bad)),
                            "litellm_session_id", "visible ASCII")
        _assert_invalid(await http.post("/v1/chat/completions", json=_call(vllm_xargs={"session_id": 7})),
                        "vllm_xargs.session_id", "string")
        _assert_invalid(await http.post("/v1/sessions", json={"id": "a b"}), "id", "visible ASCII")
        _assert_invalid(await http.post("/v1/sessions", json={"id": ""}), "id", "empty")
        _assert_invalid(await _view(http, too_long), "session_id", "at most 128")
        _assert_invalid(await http.delete("/v1/sessions/a%20b"), "session_id", "visible ASCII")
        bad_thread = await http.post("/v1/chat/completions", json=_call(session_id="fine", thread_id="a.b"))
        assert bad_thread.status_code == 400 and bad_thread.json()["error"]["param"] == "thread_id"
        bad_final = await http.post("/v1/chat/completions", json=_call(session_id="fine"),
                                    headers={"X-Session-Final": "maybe"})
        _assert_invalid(bad_final, "X-Session-Final", "'true' or 'false'")


async def test_opt_in_fields_name_the_session_only_when_enabled(stack):
    user_id, cache_key = _new_id("user"), _new_id("cache")
    async with _http(stack) as http:  # off by default: `user` is only OpenAI's end-user id
        plain = await http.post("/v1/chat/completions", json=_call(user=user_id))
        assert plain.status_code == 200 and plain.json()["session_id"] is None
        assert (await _view(http, user_id)).status_code == 404
    async with api_replica(stack, session_id_fields="prompt_cache_key,user") as url, _http(stack, base_url=url) as http:
        by_user = await http.post("/v1/chat/completions", json=_call(user=user_id))
        by_key = await http.post("/v1/chat/completions", json=_call(user=user_id, prompt_cache_key=cache_key))
        named = await http.post("/v1/chat/completions", json=_call(user=user_id), headers={"X-Session-Id": cache_key})
        assert [r.json()["session_id"] for r in (by_user, by_key, named)] == [user_id, cache_key, cache_key]
        assert (await _wait_for_calls(http, user_id, 1))["num_calls"] == 1
        assert (await _wait_for_calls(http, cache_key, 2))["num_calls"] == 2


async def test_per_session_limits_key_by_the_tenants_own_session(stack):
    session_id = _new_id("limited")
    slow = _call(max_tokens=40)
    async with api_replica(stack, max_concurrent_calls_per_session=1) as url, \
            _http(stack, "acme", url) as acme, _http(stack, "globex", url) as globex:
        mine, theirs = await asyncio.gather(acme.post("/v1/chat/completions", json=slow,
                                                      headers={"X-Session-Id": session_id}),
                                            globex.post("/v1/chat/completions", json=slow,
                                                        headers={"X-Session-Id": session_id}))
        assert (mine.status_code, theirs.status_code) == (200, 200)  # two tenants: two sessions, two limits
        first, second = await asyncio.gather(*(acme.post("/v1/chat/completions", json=slow,
                                                         headers={"X-Session-Id": session_id}) for _ in range(2)))
    assert sorted((first.status_code, second.status_code)) == [200, 429]
    refused = first if first.status_code == 429 else second
    assert refused.json()["error"]["message"].startswith(f"session {session_id!r} has 1 calls")  # the client's id
