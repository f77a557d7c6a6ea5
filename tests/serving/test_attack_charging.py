"""The attack scenario at small scale on the serving stack: fresh parentless thread ids are charged
like an honest client's single thread, odd ids are refused before any work, abused tool hints are
clamped and change no charge, and a session per call
or no session at all resets the program's charge but not the tenant's."""

from __future__ import annotations

import pytest

from loadgen.live.attack import STRATEGIES, TenantCharges, measure_charging


async def test_forged_threads_are_charged_like_an_honest_client(stack):
    keys = {s: ("acme", stack.key("acme")) for s in STRATEGIES}
    out = await measure_charging(stack.base_url, keys, calls=3, max_tokens=4)
    assert out["honest"]["served"] == out["forged_threads"]["served"] == 3
    assert out["forged_threads"]["charged_vs_honest"] == pytest.approx(1.0, rel=0.05)
    assert out["odd_ids"]["served"] == 0 and set(out["odd_ids"]["refused"]) == {400}
    assert out["session_per_call"]["sessions"] == 3
    # a new tool on every call, each with an absurd pause: served (the pause clamped), charged the same
    assert out["hint_abuse"]["served"] == 3
    assert out["hint_abuse"]["charged_vs_honest"] == pytest.approx(1.0, rel=0.05)
    assert out["session_per_call"]["total_charged_s"] == pytest.approx(out["honest"]["total_charged_s"], rel=0.05)


async def test_a_session_per_call_and_sessionless_calls_are_charged_to_the_tenant_like_an_honest_client(
        stack, make_bus):
    bus = await make_bus("cli")
    charges = TenantCharges()
    await charges.start(bus)
    keys = {"honest": ("acme", stack.key("acme")), "session_per_call": ("globex", stack.key("globex")),
            "sessionless": ("globex", stack.key("globex"))}
    out = await measure_charging(stack.base_url, keys, calls=3, max_tokens=4, charges=charges)
    assert out["session_per_call"]["charged_vs_honest"] < 0.9  # the program's charge resets...
    for strategy in ("session_per_call", "sessionless"):  # ...the tenant's does not
        assert out[strategy]["tenant_charged_vs_honest"] == pytest.approx(1.0, rel=0.05), out
