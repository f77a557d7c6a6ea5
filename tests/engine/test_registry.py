"""The one engine factory: a spec means the same on every path, and a bad backend is named."""

from __future__ import annotations

import pytest

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory
from shared.engine.registry import BACKENDS, EngineSpec, build_engine, build_engines


def test_unknown_backend_is_refused_with_the_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown engine backend 'tpu'; valid: lite, emulated"):
        build_engine("tpu", "e0", SchedulingPolicy(PolicyName.FCFS), DictProgramDirectory(), EngineSpec())


def test_lite_engine_takes_every_field_of_the_spec() -> None:
    spec = EngineSpec(starvation=StarvationConfig(beta=None), batching="v0", prefix_caching=True,
                      preemption="swap", max_num_seqs=7, num_blocks=300, kv_retention=RetentionConfig(),
                      host_kv_blocks=50, batched_swap=True)
    engine = build_engine("lite", "e3", SchedulingPolicy(PolicyName.FCFS), DictProgramDirectory(), spec)
    cfg = engine.config
    assert engine.engine_id == "e3"
    assert (cfg.mode.value, cfg.prefix_caching, cfg.preemption.value) == ("v0", True, "swap")
    assert (cfg.max_num_seqs, cfg.num_blocks, cfg.swap_space_blocks, cfg.batched_swap) == (7, 300, 50, True)
    assert cfg.starvation.beta is None and cfg.kv_retention == RetentionConfig()


def test_a_cluster_is_engines_e0_to_en_minus_1() -> None:
    directory = DictProgramDirectory()
    engines = build_engines("lite", 3, SchedulingPolicy(PolicyName.FCFS), directory, EngineSpec())
    assert [e.engine_id for e in engines] == ["e0", "e1", "e2"]
    assert set(BACKENDS) == {"lite", "emulated"}
