"""A call's prompt segments as chat messages the API will count and cache the same way.

The API estimates tokens as characters / 4 and hashes each message into one KV segment, so a
segment of `n` tokens becomes one message of `4n` characters whose text is a pure function of the
segment id: equal segment ids give equal messages, hence a shared KV prefix on the engine. An
output segment (`out:<call id>`) becomes the assistant message the API returned for that call, which
the API maps back to the engine's own cached output.
"""

from __future__ import annotations

import random

from loadgen.workloads.spec import CallSpec
from shared.engine.api import output_segment_id

CHARS_PER_TOKEN = 4  # the API's documented estimate
_WORDS = tuple(" " + w for w in ("abc", "def", "ghi", "jkl", "mno", "pqr", "stu", "vwx", "yza", "bcd",
                                 "efg", "hij", "klm", "nop", "qrs", "tuv"))


def segment_text(segment_id: str, num_tokens: int, words: tuple[str, ...] = _WORDS) -> str:
    rng = random.Random(segment_id)
    return "".join(rng.choice(words) for _ in range(num_tokens))


def call_messages(call: CallSpec, outputs: dict[str, str], words: tuple[str, ...] = _WORDS) -> list[dict[str, str]]:
    """Messages for `call`; `outputs` maps spec call ids to the response text received for them."""
    by_output_segment = {output_segment_id(cid): text for cid, text in outputs.items()}
    messages = []
    for seg_id, tokens in call.prompt_segments:
        if seg_id in by_output_segment:
            messages.append({"role": "assistant", "content": by_output_segment[seg_id]})
        else:  # one role for all content, so a segment hashes the same wherever it appears
            messages.append({"role": "user", "content": segment_text(seg_id, tokens, words)})
    return messages
