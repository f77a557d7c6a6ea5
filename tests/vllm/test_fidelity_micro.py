"""Lite and emulated agree on a small trace (the full-size run is tests/vllm/fidelity_micro.py)."""

from __future__ import annotations

import pytest

from tests.vllm.needs_vllm import import_adapter

import_adapter()
pytestmark = pytest.mark.vllm


@pytest.mark.parametrize("policy", ["fcfs", "plas"])
def test_lite_and_emulated_agree_on_latency(policy):
    from tests.vllm.fidelity_micro import chains, run

    trace = chains(30)
    lite, emu = run(policy, "lite", trace), run(policy, "emulated", trace)
    assert emu["mean_norm_ms_per_token"] == pytest.approx(lite["mean_norm_ms_per_token"], rel=0.15)
    assert emu["end_s"] == pytest.approx(lite["end_s"], rel=0.15)
