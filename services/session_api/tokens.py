"""Prompt text -> token counts and KV segments, and the fabricated response text.

The engines model time and memory; they fabricate tokens. So the API needs a token count for a
prompt without a tokenizer. The documented estimate is OpenAI's rule of thumb for English text:

    tokens(text) = ceil(len(text) / 4)      (4 characters per token; 0 for empty text)

Chat prompts count the content of every message (role markup is not counted). The response text
is filler made of 4-character pieces, one per generated token, so that `tokens(response) ==
completion_tokens` holds exactly and a client that sends a response back in its history is
charged the same tokens the engine generated.

Segments: every message becomes one KV segment `(id, tokens)` whose id hashes its role and
content, so two calls whose histories start with the same messages share a prefix on the engine.
An assistant message that is a response this API produced maps back to the engine's own output
segment (`out:<call id>`), which the engine has already cached. Ids hash the tenant's salt in
(`tenant_salts.py`), so two tenants' segments never match and neither can probe the other's cache.
"""

from __future__ import annotations

import hashlib
import math

from shared.engine.api import Segment, output_segment_id
from shared.lru import LRU

CHARS_PER_TOKEN = 4

# 4-character pieces (leading space included): one piece = one estimated token
_PIECES = tuple(
    " " + w for w in (
        "lor", "ips", "dol", "sit", "ame", "con", "sec", "adi", "eli", "sed", "eiu", "tem", "inc",
        "lab", "dol", "mag", "ali", "qua", "ven", "nos", "exe", "ull", "lab", "nis", "com", "aut",
    )
)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def render_token_ids(token_ids: list[int]) -> str:
    """The engines fabricate token ids; each renders as one 4-character piece."""
    return "".join(_PIECES[i % len(_PIECES)] for i in token_ids)


def content_segment_id(role: str, content: str, salt: str = "") -> str:
    key = f"{salt}\0{role}\0{content}" if salt else f"{role}\0{content}"
    digest = hashlib.blake2b(key.encode(), digest_size=12).hexdigest()
    return f"msg:{digest}"


class OutputIndex:
    """Remembers which response text came from which engine call (bounded LRU).

    Per API process, filled by the other workers too (peer_notes.py): a miss only costs a
    prefix-cache hit, never correctness (the segment is then counted as new tokens).
    """

    def __init__(self, capacity: int = 200_000) -> None:
        self._by_segment: LRU[str, str] = LRU(capacity)

    def remember(self, response_text: str, call_id: str, salt: str = "") -> None:
        self.remember_segment(content_segment_id("assistant", response_text, salt), call_id)

    def remember_segment(self, segment_id: str, call_id: str) -> None:
        """An assistant segment (`content_segment_id`) another API worker saw answered (peer_notes.py)."""
        self._by_segment.put(segment_id, call_id)

    def segment_for(self, role: str, content: str, salt: str = "") -> Segment:
        seg_id = content_segment_id(role, content, salt)
        if role == "assistant":
            call_id = self._by_segment.get(seg_id)
            if call_id is not None:
                seg_id = output_segment_id(call_id)
        return (seg_id, estimate_tokens(content))


def segments_for_messages(messages: list[tuple[str, str]], outputs: OutputIndex,
                          salt: str = "") -> tuple[Segment, ...]:
    """(role, content) pairs -> KV segments (salted per tenant); empty messages take no tokens and are dropped."""
    return tuple(outputs.segment_for(role, content, salt) for role, content in messages if content)
