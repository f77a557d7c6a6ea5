"""A scheduling policy with its MLFQ settings: what engines and the simulator hold.

The policies themselves are plug-ins (`shared.core.policies`: the interface, one module each, the
registry); this module binds one to its `MlfqConfig` and names the built-ins (`PolicyName`, made
from the registry, so a new policy needs no edit here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from shared.core.mlfq import MlfqConfig
from shared.core.policies import registry
from shared.core.policies.base import CallView, Policy, PriorityKey
from shared.core.program import ServiceAggregation

__all__ = ["CallView", "PolicyName", "PriorityKey", "SchedulingPolicy", "parse_policy"]

PolicyName = StrEnum("PolicyName", [(p.name.upper(), p.name) for p in registry.BUILTIN])
_BUILTIN_NAMES = frozenset(p.value for p in PolicyName)


def parse_policy(name: str) -> PolicyName | str:
    """A registered policy's name (a PolicyName for the built-ins); a clear error listing the
    valid names otherwise."""
    found = registry.get(name).name
    return PolicyName(found) if found in _BUILTIN_NAMES else found


@dataclass(frozen=True)
class SchedulingPolicy:
    name: PolicyName | str
    mlfq: MlfqConfig = MlfqConfig()
    impl: Policy = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", parse_policy(self.name))
        object.__setattr__(self, "impl", registry.get(self.name))

    # what the policy is (see `Policy` for each)
    @property
    def aggregation(self) -> ServiceAggregation:
        return self.impl.aggregation

    @property
    def preemptive(self) -> bool:
        return self.impl.preemptive

    @property
    def program_aware(self) -> bool:
        return self.impl.program_aware

    @property
    def has_levels(self) -> bool:
        return self.impl.has_levels

    @property
    def static_key(self) -> bool:
        return self.impl.static_key

    @property
    def inputs(self) -> frozenset[str]:
        return self.impl.inputs

    @property
    def description(self) -> str:
        return self.impl.description

    # what it decides
    def key(self, call: CallView) -> PriorityKey:
        return self.impl.key(call, self.mlfq)

    def level(self, call: CallView) -> int:
        return self.impl.level(call, self.mlfq)

    def next_key_change_s(self, call: CallView, level: int) -> float:
        return self.impl.next_key_change_s(call, level, self.mlfq)

    def vllm_priority(self, key: PriorityKey) -> int:
        return self.impl.vllm_priority(key)
