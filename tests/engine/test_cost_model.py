"""The cost model computes exactly the model's formulas with the cited constants."""

from __future__ import annotations

import math

import pytest

from shared.engine.cost_model import PRESETS, CostModel, get_preset

MIB = 1024 * 1024


def test_default_preset_linear_layers_follow_the_design_formula():
    cm = CostModel()
    assert cm.preset.name == "llama3.1-8b-a100"
    for n in (0, 1, 64, 512, 8192):
        expected = math.sqrt(9.76e-3**2 + (0.067e-3 * n) ** 2)
        assert cm.linear_s(n) == pytest.approx(expected, rel=1e-12)


def test_decode_attention_reads_whole_context_at_70_percent_of_hbm():
    cm = CostModel("llama3.1-8b-a100")
    assert cm.preset.model.kv_bytes_per_token == 128 * 1024
    ctx = 100_000
    assert cm.decode_attention_s(ctx) == pytest.approx(ctx * 131072 / (0.7 * 2.039e12), rel=1e-12)
    h100 = CostModel("llama3.1-8b-h100")
    assert h100.decode_attention_s(ctx) == pytest.approx(ctx * 131072 / (0.7 * 3.35e12), rel=1e-12)


def test_kv_capacity_and_bytes_per_token():
    assert get_preset("llama3.1-8b-a100").num_kv_blocks == 27_500  # about 27.5K blocks free (Vidur's A100 profile)
    assert 26_000 <= get_preset("llama3.1-8b-h100").num_kv_blocks <= 29_000  # same 80 GB, same model
    p70 = get_preset("llama3.1-70b-tp4-a100")
    assert p70.model.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2  # 320 KiB
    assert p70.kv_bytes_per_token_per_gpu == 80 * 1024
    assert p70.num_kv_blocks > 10_000


def test_70b_linear_includes_design_constants_plus_allreduce():
    cm = CostModel("llama3.1-70b-tp4-a100")
    base = math.sqrt(25e-3**2 + (0.162e-3 * 1000) ** 2)
    assert cm.linear_s(1000) > base
    assert cm.linear_s(1000) - base < 0.2 * base  # the all-reduce is a correction, not the bulk


def test_h100_constants():
    cm = CostModel("llama3.1-8b-h100")
    assert cm.linear_s(0) == pytest.approx(5.9e-3)
    assert cm.linear_s(10_000) == pytest.approx(math.sqrt(5.9e-3**2 + 0.23**2))


def test_prefill_chunk_attends_to_the_whole_context():
    cm = CostModel()
    fresh = cm.prefill_attention_s(4096, 4096)
    late = cm.prefill_attention_s(4096, 40_960)  # same chunk after 36,864 tokens of history
    assert late > 5 * fresh
    assert late >= cm.decode_attention_s(40_960)  # at least reads every prior KV entry
    assert cm.step_s(4096, 0, ((4096, 40_960),)) == pytest.approx(cm.linear_s(4096) + late)


def test_swap_cost_per_copy_plus_pcie_and_batching_removes_copies():
    cm = CostModel()
    blocks = 100
    copies = 2 * 32 * blocks  # K and V, every layer, every block
    expected = copies * 2.5e-6 + blocks * 16 * 128 * 1024 / 25e9
    assert cm.swap_s(blocks) == pytest.approx(expected, rel=1e-12)
    batched = cm.swap_s(blocks, batched=True)
    assert batched == pytest.approx(2 * 32 * 2.5e-6 + blocks * 2 * MIB / 25e9, rel=1e-12)
    assert 2 < cm.swap_s(blocks) / batched < 8  # paper: 3-7x less swap time
    assert cm.swap_s(0) == 0.0


def test_unknown_preset_lists_valid_names():
    with pytest.raises(ValueError) as err:
        get_preset("gpt-5-on-a-toaster")
    for name in PRESETS:
        assert name in str(err.value)
    with pytest.raises(ValueError):
        CostModel("nope")
