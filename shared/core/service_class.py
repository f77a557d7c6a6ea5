"""Classes of service: an outer class (vLLM's request `priority`, or a tenant's fair-share rank)
ahead of the policy's own class (its MLFQ level, or remaining work for SRPT).

A call's full order is `(outer,) + policy key`; preemption compares classes only, so calls of
equal class never displace each other (no thrash inside a level), and a better outer class
always wins whatever the policy says.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from shared.core.preemption import Preemption

# (outer class, policy key): what a scheduling state hands to `plan_class_preemptions`
Ranked = tuple[int, tuple, Hashable]


def strictly_better(outer_a: int, class_a: float, outer_b: int, class_b: float, min_class_gap: float = 0.0) -> bool:
    """Whether class (outer_a, class_a) beats (outer_b, class_b) by enough to preempt."""
    if outer_a != outer_b:
        return outer_a < outer_b
    return class_a + min_class_gap < class_b


def plan_class_preemptions(waiting: Sequence[Ranked], running: Sequence[Ranked],
                           min_class_gap: float = 0.0) -> list[Preemption]:
    """Pair the best waiting calls with the worst runners while the waiter's class is strictly
    better (as `plan_preemptions`, with the outer class first)."""
    queue = sorted(waiting, key=lambda r: (r[0], r[1]))
    victims = sorted(running, key=lambda r: (r[0], r[1]), reverse=True)
    plan: list[Preemption] = []
    for (wo, wkey, wid), (ro, rkey, rid) in zip(queue, victims, strict=False):
        if not strictly_better(wo, wkey[0], ro, rkey[0], min_class_gap):
            break
        plan.append(Preemption(victim=rid, beneficiary=wid, reason=f"class {(wo, wkey[0])} < {(ro, rkey[0])}"))
    return plan


TENANT_RANK_SPAN = 1 << 16  # tenant ranks inside one client priority


def outer_class(client_priority: int, tenant_rank: int) -> int:
    """One integer for vLLM-style queues: the client's priority first, its tenant's rank (0 =
    capacity first) inside it."""
    return client_priority * TENANT_RANK_SPAN + min(max(tenant_rank, 0), TENANT_RANK_SPAN - 1)
