"""No cross-tenant probing through the prefix cache (issue 13, item 6), on a real vLLM engine.

The API sets vLLM's `cache_salt` from the tenant, so a prompt another tenant sent a moment ago
is not a prefix hit (`cached_tokens` 0), while the same tenant's repeat still is."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from tests.real.conftest import OTHER_API_KEY

pytestmark = pytest.mark.vllm


def test_a_prefix_cached_for_one_tenant_is_cold_for_another(mesh):
    long = [{"role": "user", "content": f"{uuid.uuid4()} read the file and run the tests " * 120}]
    other = dataclasses.replace(mesh, api_key=OTHER_API_KEY)

    def cached(endpoint) -> int:
        answer = endpoint.client().chat.completions.create(model="tiny", messages=long, max_tokens=2, temperature=0)
        assert answer.usage.prompt_tokens > 256
        return answer.usage.prompt_tokens_details.cached_tokens or 0

    cached(mesh)  # warms tenant "real"'s cache
    assert cached(other) == 0  # the same prompt, another tenant: no hit
    assert cached(mesh) > 0  # the first tenant still hits its own prefix
