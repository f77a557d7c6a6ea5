"""Bad HTTP input: schemathesis against the session API's OpenAPI document on the real stack, a small
count here (the 1,000+ case run is `autellix fuzz-api --examples 150`, recorded in docs/reliability.md):
no 5xx, and every response as documented (status, content type, headers, body)."""

from __future__ import annotations

import pytest

from loadgen.chaos.fuzz_api import fuzz

pytestmark = pytest.mark.timeout(120)


async def test_schemathesis_finds_no_server_error_and_nothing_off_the_document(chaos_stack):
    await chaos_stack.wait_ready()
    result = await fuzz(chaos_stack.api_url, chaos_stack.tenant_keys["acme"], max_examples=10, seed=1, timeout_s=100)
    assert result["cases"] >= 80, {k: v for k, v in result.items() if k != "output_tail"}
    assert result["server_errors"] == 0 and not result["failures"], (result["failures"], result["output_tail"])
    assert result["exit_code"] == 0, result["output_tail"]
