"""Policy variants the simulator compares: a scheduling policy plus, for the paper's baseline,
the engine settings that come with it.

`fcfs-v0` is the paper's baseline, vLLM 0.6.1's default: FCFS, whole prefills scheduled ahead of
decodes (no chunked prefill) and no prefix cache. `fcfs` is an optimized FCFS on the run's engine
settings (by default chunked prefill and prefix caching, as vLLM V1). Every other policy runs on
the run's engine settings too.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.policies import registry
from shared.core.policy import PolicyName, parse_policy


@dataclass(frozen=True)
class PolicyVariant:
    name: str
    policy: PolicyName
    description: str
    batching: str | None = None  # None: the run's setting
    prefix_cache: bool | None = None


_BASELINE = PolicyVariant("fcfs-v0", PolicyName.FCFS,
                          "FCFS, v0 batching, no prefix cache (vLLM 0.6.1 default: the paper's baseline)",
                          batching="v0", prefix_cache=False)
# the baseline, then every registered policy on the run's settings (a new policy needs no line here)
VARIANTS: dict[str, PolicyVariant] = {
    v.name: v for v in (_BASELINE, *(PolicyVariant(n, parse_policy(n), registry.get(n).description)
                                     for n in registry.names()))
}
DEFAULT_POLICIES = tuple(VARIANTS)


def parse_variants(text: str) -> tuple[PolicyVariant, ...]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"no policy given; valid policies: {', '.join(VARIANTS)}")
    out = []
    for n in names:
        if n not in VARIANTS:
            raise ValueError(f"unknown policy {n!r}; valid policies: {', '.join(VARIANTS)}")
        if VARIANTS[n] not in out:
            out.append(VARIANTS[n])
    return tuple(out)
