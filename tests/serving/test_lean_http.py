"""The load harnesses' lean HTTP client against the real API: answers read whole, connections
reused (keep-alive) after a 200 and after an error answer."""

from __future__ import annotations

import json

from loadgen.live.lean_http import LeanHttpPool

BODY = {"model": "autellix-lite", "max_tokens": 2, "messages": [{"role": "user", "content": "lean client"}]}


async def test_one_connection_carries_answers_and_errors_in_turn(stack):
    async with LeanHttpPool(stack.base_url, size=1) as http:
        for key, expected in ((stack.key("acme"), 200), ("sk-not-a-key-at-all", 401), (stack.key("acme"), 200)):
            status, data = await http.post_json("/v1/chat/completions", BODY, {"Authorization": f"Bearer {key}"})
            answer = json.loads(data)
            assert status == expected, answer
            if status == 200:
                assert answer["usage"]["completion_tokens"] == 2
            else:
                assert answer["error"]["code"], answer
