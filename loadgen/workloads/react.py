"""ReAct: BFCL-style function-calling agent, one thread alternating LLM calls and tool calls.

Figures and where they come from:
- calls per program: 1 + geometric (the loop stops with a constant probability after each step,
  i.e. when the model answers instead of calling a function), mean 10.75 (the paper, the paper's
  BFCL figure; the Agentix (NSDI 2026) analysis: "10.75 for BFCL"), capped at 100.
- uncached prefill per call: log-normal, mean 735 tokens (the paper: "735 uncached prefill"),
  log-sigma 0.8 (assumption). On the first call it is the user request; later it is the tool
  result (observation) returned by the function just called.
- decode per call: log-normal, mean 34 tokens (the paper: "34 decode"), log-sigma 0.6
  (assumption; a function call in JSON is short and regular).
- tool schemas: one 5,000-token system segment `react:tool-schemas` shared by *all* react
  programs (the paper "Where the gains come from": BFCL's 735 tokens are the uncached part of a
  context that carries about 5K tokens of tool schemas).
- context: call k's prompt = schemas + (input_j, output_j) for j < k + input_k; everything but the
  newest input is a cached prefix, so the uncached part stays 735 on average while KV occupancy
  and attention cover the whole, growing context.
- tool pauses: tool class `function` before every call after the first; zero unless enabled.
"""

from __future__ import annotations

import random

from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.limits import MAX_CONTEXT_TOKENS
from loadgen.workloads.sampling import geometric_count, lognormal_int
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import ToolDelayModel

CALLS_MEAN = 10.75
CALLS_CAP = 100
NEW_TOKENS_MEAN = 735
NEW_TOKENS_SIGMA = 0.8
NEW_TOKENS_CAP = 16384
OUTPUT_TOKENS_MEAN = 34
OUTPUT_TOKENS_SIGMA = 0.6
OUTPUT_TOKENS_CAP = 1024
TOOL_SCHEMAS_SEGMENT = ("react:tool-schemas", 5000)
TOOL_CLASS = "function"


def react_program(
    program_id: str, rng: random.Random, tools: ToolDelayModel, workload: str = "react"
) -> ProgramSpec:
    builder = ProgramBuilder(program_id, workload)
    num_calls = geometric_count(rng, CALLS_MEAN, CALLS_CAP)
    history: tuple = (TOOL_SCHEMAS_SEGMENT,)
    context_tokens = TOOL_SCHEMAS_SEGMENT[1]
    previous = None
    for step in range(num_calls):
        new = builder.segment("obs" if step else "user", lognormal_int(rng, NEW_TOKENS_MEAN, NEW_TOKENS_SIGMA, 1, NEW_TOKENS_CAP))
        output_tokens = lognormal_int(rng, OUTPUT_TOKENS_MEAN, OUTPUT_TOKENS_SIGMA, 1, OUTPUT_TOKENS_CAP)
        delay_s = tools.delay_s(rng, TOOL_CLASS) if step else 0.0
        if step and context_tokens + new[1] + output_tokens > MAX_CONTEXT_TOKENS:
            break
        prompt = history + (new,)
        spec = builder.call(
            prompt,
            output_tokens,
            depends_on=(previous.call_id,) if previous else (),
            delay_s=delay_s,
            tool=TOOL_CLASS if step else None,
        )
        history = prompt + (builder.output_segment(spec),)
        context_tokens += new[1] + output_tokens
        previous = spec
    return builder.build()
