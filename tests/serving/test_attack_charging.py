"""The attack scenario at small scale on the serving stack: fresh parentless thread ids are charged
like an honest client's single thread, odd ids are refused before any work, and a session per call
is charged only its own call (what the scenario reports as the open gap)."""

from __future__ import annotations

import pytest

from loadgen.live.attack import measure_charging


async def test_forged_threads_are_charged_like_an_honest_client(stack):
    out = await measure_charging(stack.base_url, stack.key("acme"), calls=3, max_tokens=4)
    assert out["honest"]["served"] == out["forged_threads"]["served"] == 3
    assert out["forged_threads"]["charged_vs_honest"] == pytest.approx(1.0, rel=0.05)
    assert out["odd_ids"]["served"] == 0 and set(out["odd_ids"]["refused"]) == {400}
    assert out["session_per_call"]["sessions"] == 3
    assert out["session_per_call"]["total_charged_s"] == pytest.approx(out["honest"]["total_charged_s"], rel=0.05)
