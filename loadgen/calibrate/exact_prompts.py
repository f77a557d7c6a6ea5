"""Prompts whose length under the tiny model's tokenizer is the spec's token count.

The live load generator writes a segment of n tokens as 4n characters (the API's estimate for the
simulated engines); a real tokenizer makes another count of that, and the simulator would then
model other programs than the engine ran. Each word of the tiny model's tokenizer training text is
one token with its leading space, so n such words are n tokens (plus a few per message for the
chat template's role prefix). The words are a pure function of the segment id, so equal segments
give equal text and share the engine's prefix cache as they do in the simulator.
"""

from __future__ import annotations

from loadgen.live import prompts
from loadgen.workloads.spec import CallSpec
from shared.engine.tiny_model import _TRAINING_WORDS

ONE_TOKEN_WORDS = tuple(" " + w for w in sorted(set(_TRAINING_WORDS)))


def segment_text(segment_id: str, num_tokens: int) -> str:
    return prompts.segment_text(segment_id, num_tokens, ONE_TOKEN_WORDS)


def call_messages(call: CallSpec, outputs: dict[str, str]) -> list[dict[str, str]]:
    """As `loadgen.live.prompts.call_messages`, with token-exact segment text."""
    return prompts.call_messages(call, outputs, ONE_TOKEN_WORDS)
