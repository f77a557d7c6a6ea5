"""The SRPT oracle's knowledge: each call's isolated run time from the cost model.

This is clairvoyance, for the simulation-only SRPT baseline: the oracle reads every future call's
prompt and output length, which no real scheduler knows. A call running alone prefills its
uncached tokens in chunks of the token budget, then decodes one token per step while its context
grows (the first output token comes with the last prefill chunk, as in vLLM).
"""

from __future__ import annotations

from loadgen.workloads.spec import CallSpec
from shared.engine.cost_model import CostModel


class IsolatedCallTime:
    def __init__(self, cost: CostModel, token_budget: int = 8192) -> None:
        self._cost = cost
        self._budget = token_budget
        self._decode_floor_s = cost.linear_s(1)

    def __call__(self, call: CallSpec, uncached_tokens: int) -> float:
        context = call.prompt_tokens
        cached = context - max(min(uncached_tokens, context), 1)
        t = 0.0
        done = cached
        while done < context:
            chunk = min(self._budget, context - done)
            done += chunk
            t += self._cost.linear_s(chunk) + self._cost.prefill_attention_s(chunk, done)
        decodes = max(call.output_tokens - 1, 0)
        # sum over k = 1..decodes of reading a context of (prompt + k) tokens
        ctx_sum = decodes * context + decodes * (decodes + 1) / 2
        return t + decodes * self._decode_floor_s + self._cost.decode_attention_s(int(ctx_sum))
