"""Client-chosen sessions on a real model (both meshes): a call names its own session id, the answer
carries it back in `X-Session-Id`, and the process table counts the program's calls and service."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

pytestmark = pytest.mark.vllm


def test_a_client_chosen_session_groups_real_calls(mesh):
    session = f"agent-run-{uuid.uuid4().hex[:8]}"
    client = mesh.client()
    for turn in range(2):
        raw = client.chat.completions.with_raw_response.create(
            model="tiny", messages=[{"role": "user", "content": f"turn {turn}"}], max_tokens=8,
            extra_headers={"X-Session-Id": session})
        assert raw.headers["x-session-id"] == session
        assert raw.parse().choices[0].message.content
    headers = {"Authorization": f"Bearer {mesh.api_key}"}
    deadline = time.monotonic() + 10
    while True:
        view = httpx.get(f"{mesh.base_url}/v1/sessions/{session}", headers=headers).json()
        if view["num_calls"] == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert view["id"] == session and view["num_calls"] == 2
    assert view["attained_service_s"] > 0
