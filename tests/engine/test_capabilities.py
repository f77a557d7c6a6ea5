"""Engines declare what they can do beyond the Engine protocol; every declared capability has the
members its protocol names, and a configuration-dependent one is declared only when it is on."""

from __future__ import annotations

import pytest

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine import capabilities as caps
from shared.engine.api import DictProgramDirectory
from shared.engine.capabilities import Capability
from shared.engine.registry import EngineSpec, build_engine

PROTOCOL_OF = {Capability.GIVE_UP_QUEUED: caps.GivesUpQueued, Capability.RETAIN_SESSIONS: caps.RetainsSessions,
               Capability.FORGET_SESSIONS: caps.ForgetsSessions, Capability.COUNTERS: caps.HasCounters}


def _members(protocol: type) -> set[str]:
    names = set(protocol.__annotations__) | {n for n in vars(protocol) if not n.startswith("_")}
    return names


def _lite(retention: RetentionConfig | None):
    return build_engine("lite", "e0", SchedulingPolicy(PolicyName.FCFS), DictProgramDirectory(),
                        EngineSpec(kv_retention=retention))


def test_every_capability_names_a_protocol() -> None:
    assert set(PROTOCOL_OF) == set(Capability)


@pytest.mark.parametrize("retention", [None, RetentionConfig()], ids=["plain-lru", "workflow"])
def test_lite_declares_retention_only_when_it_retains(retention) -> None:
    engine = _lite(retention)
    assert (Capability.RETAIN_SESSIONS in engine.capabilities) == (retention is not None)
    assert {Capability.GIVE_UP_QUEUED, Capability.FORGET_SESSIONS, Capability.COUNTERS} <= engine.capabilities
    for capability in engine.capabilities:
        missing = [n for n in _members(PROTOCOL_OF[capability]) if not hasattr(engine, n)]
        assert missing == [], f"{capability} declared without {missing}"
