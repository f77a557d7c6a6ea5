"""The live driver for a real engine: token-exact prompts and full-length answers.

Only the request differs from `LiveDriver`'s: prompts from `exact_prompts` and `ignore_eos`, so a
random-weight model generates exactly the spec's output tokens (it would otherwise stop at a
random end-of-sequence token) and every call is the one the simulator runs.
"""

from __future__ import annotations

from loadgen.calibrate.exact_prompts import call_messages
from loadgen.live.driver import LiveDriver


class RealEngineDriver(LiveDriver):
    def __init__(self, base_url: str, api_key: str, model: str = "tiny", **kwargs) -> None:
        super().__init__(base_url, api_key, model, extra_body={"ignore_eos": True}, **kwargs)

    async def _call(self, session_id: str, call, outputs: dict[str, str],
                    next_tool: str | None = None) -> tuple[str, int, int]:
        headers = {"X-Session-Id": session_id, "X-Thread-Id": call.thread_id}
        if call.parent_thread_id:
            headers["X-Parent-Thread-Id"] = call.parent_thread_id
        self.progress.calls_in_flight += 1
        pieces: list[str] = []
        tokens = cached = 0
        try:
            stream = await self.client.chat.completions.create(
                model=self.model, messages=call_messages(call, outputs), max_tokens=call.output_tokens,
                stream=True, stream_options={"include_usage": True}, extra_headers=headers,
                extra_body=self.extra_body, temperature=0.0)
            async for chunk in stream:
                if chunk.usage is not None:
                    tokens = chunk.usage.completion_tokens
                    details = chunk.usage.prompt_tokens_details
                    cached = (details.cached_tokens or 0) if details is not None else 0
                for choice in chunk.choices:
                    if choice.delta.content:
                        pieces.append(choice.delta.content)
        finally:
            self.progress.calls_in_flight -= 1
        self.progress.calls_done += 1
        self.progress.tokens += tokens
        return "".join(pieces), tokens, cached
