"""A scheduling policy with its MLFQ settings: what engines and the simulator hold.

The policies themselves are plug-ins (`shared.core.policies`: the interface, one module each, the
registry); this module binds one to its `MlfqConfig` and names the built-ins (`PolicyName`, made
from the registry, so a new policy needs no edit here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar, overload

from shared.core.mlfq import MlfqConfig
from shared.core.policies import registry
from shared.core.policies.base import CallView, Policy, PriorityKey
from shared.core.program import ServiceAggregation

__all__ = ["CallView", "PolicyName", "PriorityKey", "SchedulingPolicy", "parse_policy"]

PolicyName = StrEnum("PolicyName", [(p.name.upper(), p.name) for p in registry.BUILTIN])
_BUILTIN_NAMES = frozenset(p.value for p in PolicyName)
T = TypeVar("T")


def parse_policy(name: str) -> PolicyName | str:
    """A registered policy's name (a PolicyName for the built-ins); a clear error listing the
    valid names otherwise."""
    found = registry.get(name).name
    return PolicyName(found) if found in _BUILTIN_NAMES else found


class _OfPolicy(Generic[T]):
    """A read-only attribute of the bound policy plug-in, read through by its own name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _OfPolicy[T]: ...
    @overload
    def __get__(self, obj: SchedulingPolicy, owner: type) -> T: ...
    def __get__(self, obj, owner):
        return self if obj is None else getattr(obj.impl, self.name)


@dataclass(frozen=True)
class SchedulingPolicy:
    name: PolicyName | str
    mlfq: MlfqConfig = MlfqConfig()
    impl: Policy = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", parse_policy(self.name))
        object.__setattr__(self, "impl", registry.get(self.name))

    # what the policy is (see `Policy` for each)
    aggregation = _OfPolicy[ServiceAggregation]()
    preemptive = _OfPolicy[bool]()
    program_aware = _OfPolicy[bool]()
    has_levels = _OfPolicy[bool]()
    static_key = _OfPolicy[bool]()
    inputs = _OfPolicy[frozenset[str]]()
    description = _OfPolicy[str]()

    # what it decides
    def key(self, call: CallView) -> PriorityKey:
        return self.impl.key(call, self.mlfq)

    def level(self, call: CallView) -> int:
        return self.impl.level(call, self.mlfq)

    def next_key_change_s(self, call: CallView, level: int) -> float:
        return self.impl.next_key_change_s(call, level, self.mlfq)

    def vllm_priority(self, key: PriorityKey) -> int:
        return self.impl.vllm_priority(key)
