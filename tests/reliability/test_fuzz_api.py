"""Bad HTTP input: schemathesis against the session API's OpenAPI document on the real stack, a small
count here (the 5,000+ case run is `autellix fuzz-api`, recorded in docs/results/fuzz/): no 5xx,
every error answer in OpenAI's format, every response as documented (status, content type, headers,
body), and the stateful phase follows the document's links (open -> call in it -> read -> close)."""

from __future__ import annotations

import pytest

from loadgen.chaos.fuzz_api import fuzz
from loadgen.chaos.schemathesis_hooks import error_format_problem

pytestmark = pytest.mark.timeout(120)


async def test_schemathesis_finds_no_server_error_and_nothing_off_the_document(chaos_stack):
    await chaos_stack.wait_ready()
    result = await fuzz(chaos_stack.api_url, chaos_stack.tenant_keys["acme"], max_examples=10, seed=1, timeout_s=100)
    brief = {k: v for k, v in result.items() if k != "output_tail"}
    assert result["cases"] >= 80, brief
    assert result["server_errors"] == 0 and not result["failures"], (result["failures"], result["output_tail"])
    assert result["error_answers_scanned"] > 0 and result["error_answers_off_format"] == 0, brief
    assert result["stateful_cases"] > 0 and result["stateful_link_steps"] > 0, brief
    assert result["links"]["declared"] >= 10, brief  # services/session_api/openapi_links.py
    assert result["exit_code"] == 0, result["output_tail"]


@pytest.mark.parametrize("status, body, ok", [
    (404, b'{"error": {"message": "m", "type": "t", "param": null, "code": "c"}}', True),
    (200, b"not json", True),  # not an error: not checked
    (500, b"Internal Server Error", False),
    (422, b'{"detail": [{"msg": "x"}]}', False),  # FastAPI's own shape
    (400, b'{"error": {"message": "m", "type": "t"}}', False),  # param and code missing
    (401, b'{"error": {"message": "", "type": "t", "param": null, "code": null}}', False),
])
def test_the_error_format_check(status, body, ok):
    assert (error_format_problem(status, body) is None) is ok
