"""A real model's own tokenizer and chat template in the API: prompt token counts for the limits
and the router, and the prompt's prefix identity, as the engine will see them.

`usage` is not computed here: vLLM reports it with its answer. The API's count decides only
admission (context length) and placement (load, KV locality). Tokenizers load lazily, once per
source, off the event loop; prompts longer than `INLINE_CHARS` are tokenized in a thread too.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Sequence
from typing import Any

from shared.engine.api import Segment

INLINE_CHARS = 8_192  # shorter prompts are tokenized on the loop (well under a millisecond)
PREFIX_BLOCK_TOKENS = 256  # one prefix segment per this many tokens (chained hashes)


def token_segments(token_ids: Sequence[int], block: int = PREFIX_BLOCK_TOKENS, salt: str = "") -> tuple[Segment, ...]:
    """Prefix identity of a prompt: chained hashes of its token blocks, so two prompts share their
    first k segments exactly when they share their first k blocks of tokens and the salt (the
    tenant's, `tenant_salts.py`: two tenants' prompts never share a segment)."""
    segments: list[Segment] = []
    digest = salt.encode()
    for start in range(0, len(token_ids), block):
        piece = token_ids[start:start + block]
        digest = hashlib.blake2b(digest + b",".join(str(t).encode() for t in piece), digest_size=12).digest()
        segments.append((f"tok:{digest.hex()}", len(piece)))
    return tuple(segments)


class ModelTokenizers:
    def __init__(self) -> None:
        self._loaded: dict[str, Any] = {}
        self._loading: dict[str, asyncio.Task] = {}

    async def get(self, source: str):
        tok = self._loaded.get(source)
        if tok is not None:
            return tok
        task = self._loading.get(source)
        if task is None:
            task = self._loading[source] = asyncio.get_running_loop().create_task(asyncio.to_thread(_load, source))
        try:
            tok = self._loaded[source] = await task
        finally:
            self._loading.pop(source, None)
        return tok

    async def chat_tokens(self, source: str, messages: list[dict], tools: list[dict] | None,
                          template_kwargs: dict | None = None) -> list[int]:
        tok = await self.get(source)
        size = sum(len(str(m.get("content") or "")) for m in messages)

        def render() -> list[int]:
            ids = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                          **(template_kwargs or {}))
            return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        return render() if size < INLINE_CHARS else await asyncio.to_thread(render)

    async def text_tokens(self, source: str, text: str) -> list[int]:
        tok = await self.get(source)
        if len(text) < INLINE_CHARS:
            return tok.encode(text)
        return await asyncio.to_thread(tok.encode, text)


def _load(source: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # an engine on this host has the files already
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)
