"""Agent frameworks on their default paths against the mesh in front of a real engine."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.vllm


def test_langchain_chat_openai_and_structured_output(mesh):
    from typing import Literal

    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    llm = ChatOpenAI(model="tiny", base_url=f"{mesh.base_url}/v1", api_key=mesh.api_key, max_tokens=16,
                     temperature=0, max_retries=0)
    reply = llm.invoke("plan the next step")
    assert isinstance(reply.content, str) and reply.usage_metadata["input_tokens"] > 0

    class Verdict(BaseModel):
        answer: Literal["yes", "no"]

    judge = ChatOpenAI(model="tiny", base_url=f"{mesh.base_url}/v1", api_key=mesh.api_key, max_tokens=200,
                       max_retries=0)
    verdict = judge.with_structured_output(Verdict, method="json_schema").invoke("yes or no?")
    assert verdict.answer in ("yes", "no")


async def test_openai_agents_sdk_default_path(mesh):
    """The Agents SDK's default model is the Responses API."""
    from typing import Literal

    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled
    from pydantic import BaseModel

    class Verdict(BaseModel):  # a random-weight model ends a free answer only by chance: constrain it
        answer: Literal["yes", "no"]

    set_tracing_disabled(True)
    model = OpenAIResponsesModel(model="tiny", openai_client=mesh.async_client())
    agent = Agent(name="judge", instructions="answer yes or no", model=model, output_type=Verdict,
                  model_settings=ModelSettings(max_tokens=200))
    result = await Runner.run(agent, "is the plan good?")
    assert result.final_output.answer in ("yes", "no")
