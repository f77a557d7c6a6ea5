"""The recipes of docs/sessions.md, each run against the whole stack (simulated `lite` engines):
the official openai SDK, LangChain, LangGraph, the OpenAI Agents SDK, LiteLLM and aiperf each
name the session their calls belong to, and the calls land in that one program."""

from __future__ import annotations

import asyncio
import collections
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import uuid

import httpx
import openai
import pytest

from autellix import client

MODEL = "autellix-lite"


def _new_id(tag: str) -> str:
    return f"{tag}-{uuid.uuid4()}"


async def _wait_for_calls(stack, session_id: str, num_calls: int, timeout_s: float = 15) -> dict:
    """Completions reach the process table asynchronously: poll the session's view."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    async with httpx.AsyncClient(base_url=stack.base_url,
                                 headers={"Authorization": f"Bearer {stack.key('acme')}"}) as http:
        while True:
            resp = await http.get(f"/v1/sessions/{session_id}")
            if resp.status_code == 200 and resp.json()["num_calls"] >= num_calls:
                return resp.json()
            assert asyncio.get_running_loop().time() < deadline, resp.text
            await asyncio.sleep(0.05)


# --- the official openai SDK -----------------------------------------------------------------------
async def test_openai_sdk_with_extra_headers(stack):
    session_id = _new_id("sdk")
    llm = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"))
    history = [{"role": "user", "content": "first step"}]
    for turn in range(3):
        headers = {"X-Session-Id": session_id, **({"X-Session-Final": "true"} if turn == 2 else {})}
        resp = await llm.chat.completions.create(model=MODEL, messages=history, max_tokens=4, extra_headers=headers)
        assert resp.model_extra["session_id"] == session_id
        history += [{"role": "assistant", "content": resp.choices[0].message.content},
                    {"role": "user", "content": "next"}]
    view = await _wait_for_calls(stack, session_id, 3)
    assert view["status"] == "closed"  # the last call's X-Session-Final


async def test_openai_sdk_with_the_helper_sync_and_async(stack):
    sync_llm = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"),
                             http_client=client.http_client())
    async_llm = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"),
                                   http_client=client.async_http_client())
    msg = [{"role": "user", "content": "work on it"}]
    with client.session() as session_id:
        await async_llm.chat.completions.create(model=MODEL, messages=msg, max_tokens=3)
        # a sync client blocks: off the event loop that runs the stack (to_thread copies the context)
        await asyncio.to_thread(sync_llm.chat.completions.create, model=MODEL, messages=msg, max_tokens=3)
        with client.thread("left"):
            await async_llm.chat.completions.create(model=MODEL, messages=msg, max_tokens=3)
    outside = await async_llm.chat.completions.create(model=MODEL, messages=msg, max_tokens=3)
    assert outside.model_extra["session_id"] is None  # no session context: a one-call program
    view = await _wait_for_calls(stack, session_id, 3)
    assert view["num_threads"] == 2  # main and the fork "left"


# --- LangChain and LangGraph -------------------------------------------------------------------------
async def test_langchain_chat_openai_default_headers_and_helper(stack):
    from langchain_openai import ChatOpenAI

    by_header, by_helper = _new_id("lc"), _new_id("lc-helper")
    llm = ChatOpenAI(model=MODEL, base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_tokens=4,
                     default_headers={"X-Session-Id": by_header})
    await llm.ainvoke("summarise the ticket")
    await llm.ainvoke("draft a reply")
    helped = ChatOpenAI(model=MODEL, base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_tokens=4,
                        http_async_client=client.async_http_client())
    with client.session(by_helper):
        await helped.ainvoke("summarise the ticket")
    assert (await _wait_for_calls(stack, by_header, 2))["num_calls"] == 2
    assert (await _wait_for_calls(stack, by_helper, 1))["num_calls"] == 1


async def test_langgraph_graph_run_is_one_session(stack):
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph

    llm = ChatOpenAI(model=MODEL, base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_tokens=4,
                     http_async_client=client.async_http_client())

    async def plan(state: MessagesState) -> dict:
        return {"messages": [await llm.ainvoke(state["messages"])]}

    async def act(state: MessagesState) -> dict:
        return {"messages": [await llm.ainvoke([*state["messages"], ("user", "now act on the plan")])]}

    graph = StateGraph(MessagesState)
    graph.add_node("plan", plan)
    graph.add_node("act", act)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "act")
    graph.add_edge("act", END)
    app = graph.compile()
    with client.session(_new_id("graph")) as session_id:  # nodes run in tasks: they inherit the context
        result = await app.ainvoke({"messages": [("user", "fix the failing test")]})
    assert len(result["messages"]) == 3
    assert (await _wait_for_calls(stack, session_id, 2))["num_calls"] == 2


# --- the OpenAI Agents SDK ------------------------------------------------------------------------------
async def test_openai_agents_sdk_run_is_one_session(stack):
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner

    llm = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"),
                             http_client=client.async_http_client())
    agent = Agent(name="triage", instructions="Answer briefly.",
                  model=OpenAIChatCompletionsModel(model=MODEL, openai_client=llm))
    config = RunConfig(tracing_disabled=True)  # no tracing export: nothing leaves this machine
    with client.session(_new_id("agents")) as session_id:
        first = await Runner.run(agent, "what broke?", run_config=config)
        await Runner.run(agent, first.to_input_list() + [{"role": "user", "content": "and the fix?"}],
                         run_config=config)
    assert (await _wait_for_calls(stack, session_id, 2))["num_calls"] == 2


# --- LiteLLM ----------------------------------------------------------------------------------------------
async def test_litellm_completion_with_extra_headers_or_its_session_field(stack):
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # its cost map from the package, not the web
    import litellm

    litellm.telemetry = False
    by_header, by_field = _new_id("litellm"), _new_id("litellm-field")
    common = {"model": f"openai/{MODEL}", "api_base": f"{stack.base_url}/v1", "api_key": stack.key("acme"),
              "max_tokens": 3, "messages": [{"role": "user", "content": "status?"}]}
    for _ in range(2):
        await litellm.acompletion(**common, extra_headers={"X-Session-Id": by_header})
    await litellm.acompletion(**common, extra_body={"litellm_session_id": by_field})
    assert (await _wait_for_calls(stack, by_header, 2))["num_calls"] == 2
    assert (await _wait_for_calls(stack, by_field, 1))["num_calls"] == 1


# --- aiperf ---------------------------------------------------------------------------------------------------
def _aiperf() -> str | None:
    return os.environ.get("AUTELLIX_AIPERF") or shutil.which("aiperf")


def _offline_tiktoken_env() -> dict[str, str]:
    """aiperf's `builtin` tokenizer is tiktoken's o200k_base, fetched from the web on first use;
    LiteLLM ships that file in tiktoken's cache layout, so point tiktoken there."""
    env = dict(os.environ)
    spec = importlib.util.find_spec("litellm")
    if "TIKTOKEN_CACHE_DIR" not in env and spec is not None and spec.origin:
        env["TIKTOKEN_CACHE_DIR"] = str(pathlib.Path(spec.origin).parent / "litellm_core_utils" / "tokenizers")
    return env


@pytest.mark.skipif(_aiperf() is None, reason="aiperf is not installed (set AUTELLIX_AIPERF to its executable)")
async def test_aiperf_multi_turn_sessions_with_session_header(stack, tmp_path):
    num_sessions, turns = 3, 2
    command = [_aiperf(), "profile", "--url", stack.base_url, "--endpoint-type", "chat", "--model", MODEL,
               "--api-key", stack.key("acme"), "--tokenizer", "builtin", "--session-header", "X-Session-Id",
               "--num-sessions", str(num_sessions), "--session-turns-mean", str(turns),
               "--session-turns-stddev", "0", "--isl", "32", "--osl", "4", "--concurrency", "2",
               "--ui-type", "none", "--artifact-dir", str(tmp_path)]
    process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                   env=_offline_tiktoken_env())
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, output.decode()[-4000:]
    records = [json.loads(line) for path in tmp_path.rglob("*.jsonl") for line in path.read_text().splitlines()
               if line.strip()]
    # the --session-header carries each conversation's affinity id, recorded as x_correlation_id
    sessions = collections.Counter(r["metadata"]["x_correlation_id"] for r in records if "metadata" in r)
    assert sorted(sessions.values()) == [turns] * num_sessions, (sessions, output.decode()[-2000:])
    for session_id in sessions:
        assert (await _wait_for_calls(stack, session_id, turns))["num_calls"] == turns
