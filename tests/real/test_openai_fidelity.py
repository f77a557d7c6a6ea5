"""Through the official openai client: the mesh in front of a real vLLM engine answers every field as
vLLM's own server does for the same request on the same model (side by side, same session)."""

from __future__ import annotations

import json

import openai
import pytest

pytestmark = pytest.mark.vllm
MSG = [{"role": "user", "content": "plan the next step and call a tool"}]
ENUM_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
               "required": ["answer"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def _both(mesh, direct, **kwargs):
    return (mesh.client().chat.completions.create(model="tiny", **kwargs),
            direct.client().chat.completions.create(model="tiny", **kwargs))


def test_greedy_output_and_usage_equal_a_direct_call(mesh, direct):
    ours, theirs = _both(mesh, direct, messages=MSG, max_tokens=16, temperature=0)
    assert ours.choices[0].message.content == theirs.choices[0].message.content
    assert ours.choices[0].finish_reason == theirs.choices[0].finish_reason
    assert ours.usage.prompt_tokens == theirs.usage.prompt_tokens > 0
    assert ours.usage.completion_tokens == theirs.usage.completion_tokens
    assert ours.id.startswith("chatcmpl-") and ours.model == "tiny"



def test_cached_tokens_reported_for_a_repeated_prefix(mesh):
    """vLLM caches whole KV blocks (128 tokens on CPU): a long prompt sent twice hits its own prefix."""
    long = [{"role": "user", "content": "read the file and run the tests " * 120}]
    first = mesh.client().chat.completions.create(model="tiny", messages=long, max_tokens=2, temperature=0)
    again = mesh.client().chat.completions.create(model="tiny", messages=long, max_tokens=2, temperature=0)
    assert first.usage.prompt_tokens > 256
    assert again.usage.prompt_tokens_details.cached_tokens > 0


def test_streaming_matches_and_reports_usage(mesh, direct):
    chunks = list(mesh.client().chat.completions.create(
        model="tiny", messages=MSG, max_tokens=12, temperature=0, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    _, theirs = _both(mesh, direct, messages=MSG, max_tokens=12, temperature=0)
    assert text == theirs.choices[0].message.content
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == theirs.usage.prompt_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == theirs.choices[0].finish_reason


def test_stop_seed_and_sampling(mesh, direct):
    kwargs = dict(messages=MSG, max_tokens=24, temperature=0.9, top_p=0.9, seed=1234)
    ours, theirs = _both(mesh, direct, **kwargs)
    assert ours.choices[0].message.content == theirs.choices[0].message.content  # seeded: reproducible
    again = mesh.client().chat.completions.create(model="tiny", **kwargs)
    assert again.choices[0].message.content == ours.choices[0].message.content
    text = ours.choices[0].message.content
    cut = next((ch for ch in text if ch.strip()), None)
    if cut is not None:
        stopped, theirs_stopped = _both(mesh, direct, stop=[cut], **kwargs)
        assert stopped.choices[0].message.content == theirs_stopped.choices[0].message.content
        assert cut not in stopped.choices[0].message.content
        assert stopped.choices[0].finish_reason == theirs_stopped.choices[0].finish_reason == "stop"


def test_n_and_logprobs(mesh, direct):
    ours, theirs = _both(mesh, direct, messages=MSG, max_tokens=6, temperature=1.0, seed=7, n=2, logprobs=True,
                         top_logprobs=2)
    assert len(ours.choices) == len(theirs.choices) == 2
    for a, b in zip(ours.choices, theirs.choices, strict=True):
        assert [t.token for t in a.logprobs.content] == [t.token for t in b.logprobs.content]
        assert len(a.logprobs.content[0].top_logprobs) == 2
        assert a.logprobs.content[0].logprob == pytest.approx(b.logprobs.content[0].logprob, abs=1e-3)


def test_structured_output_enum_schema(mesh, direct):
    fmt = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": ENUM_SCHEMA, "strict": True}}
    for _ in range(3):
        r = mesh.client().chat.completions.create(model="tiny", messages=MSG, max_tokens=200, response_format=fmt)
        assert json.loads(r.choices[0].message.content)["answer"] in ("yes", "no")
        assert r.choices[0].finish_reason == "stop"
    ours, theirs = _both(mesh, direct, messages=MSG, max_tokens=64, temperature=0,
                         response_format={"type": "json_object"})
    assert ours.choices[0].message.content == theirs.choices[0].message.content  # free JSON: may run long
    if ours.choices[0].finish_reason == "stop":
        json.loads(ours.choices[0].message.content)


def test_parse_with_a_pydantic_model(mesh):
    from typing import Literal

    from pydantic import BaseModel

    class Verdict(BaseModel):
        answer: Literal["yes", "no"]

    parsed = mesh.client().chat.completions.parse(model="tiny", messages=MSG, max_tokens=200, response_format=Verdict)
    assert parsed.choices[0].message.parsed.answer in ("yes", "no")


def test_named_tool_choice_returns_a_tool_call(mesh, direct):
    choice = {"type": "function", "function": {"name": "get_weather"}}
    ours, theirs = _both(mesh, direct, messages=MSG, max_tokens=12, tools=TOOLS, tool_choice=choice, temperature=0)
    # a random-weight model fills the constrained arguments slowly: both stop at the same place
    assert ours.choices[0].message.model_dump() == theirs.choices[0].message.model_dump()
    assert ours.choices[0].finish_reason == theirs.choices[0].finish_reason
    assert ours.usage.prompt_tokens == theirs.usage.prompt_tokens  # tools rendered by the chat template


def test_completions_endpoint(mesh, direct):
    ours = mesh.client().completions.create(model="tiny", prompt="the quick brown", max_tokens=8, temperature=0)
    theirs = direct.client().completions.create(model="tiny", prompt="the quick brown", max_tokens=8, temperature=0)
    assert ours.choices[0].text == theirs.choices[0].text and ours.usage.prompt_tokens == theirs.usage.prompt_tokens


def test_responses_api_text_and_streaming(mesh, direct):
    ours = mesh.client().responses.create(model="tiny", input="plan the next step", max_output_tokens=8,
                                          temperature=0)
    theirs = direct.client().responses.create(model="tiny", input="plan the next step", max_output_tokens=8,
                                              temperature=0)
    assert ours.output_text == theirs.output_text and ours.usage.input_tokens == theirs.usage.input_tokens
    events = list(mesh.client().responses.create(model="tiny", input="hi", max_output_tokens=6, stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"


def test_wrong_model_is_a_404_model_not_found(mesh):
    with pytest.raises(openai.NotFoundError) as info:
        mesh.client().chat.completions.create(model="no-such-model", messages=MSG)
    assert info.value.code == "model_not_found"
    assert info.value.response.headers.get("x-should-retry") == "false"


def test_prompt_over_the_context_is_a_400(mesh):
    with pytest.raises(openai.BadRequestError) as info:
        mesh.client().chat.completions.create(model="tiny", messages=MSG, max_tokens=200_000)
    assert info.value.code == "context_length_exceeded"


def test_a_bad_schema_is_vllms_own_400(mesh, direct):
    fmt = {"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "no-such-type"}}}
    with pytest.raises(openai.BadRequestError):
        direct.client().chat.completions.create(model="tiny", messages=MSG, max_tokens=4, response_format=fmt)
    with pytest.raises(openai.BadRequestError) as info:
        mesh.client().chat.completions.create(model="tiny", messages=MSG, max_tokens=4, response_format=fmt)
    assert info.value.response.headers.get("x-should-retry") == "false"


def test_a_client_priority_is_refused(mesh):
    with pytest.raises(openai.BadRequestError) as info:
        mesh.client().chat.completions.create(model="tiny", messages=MSG, max_tokens=4, extra_body={"priority": -5})
    assert info.value.code == "unsupported_parameter"
