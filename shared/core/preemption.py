"""Proactive preemption: a waiting call with a strictly better class displaces the worst runner."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Preemption:
    victim: Hashable
    beneficiary: Hashable
    reason: str


def plan_preemptions(
    waiting: Sequence[tuple[tuple, Hashable]],
    running: Sequence[tuple[tuple, Hashable]],
    free_slots: int,
    min_class_gap: float = 0.0,
) -> list[Preemption]:
    """Pair the best waiting calls with the worst running ones.

    `waiting` and `running` are (priority key, id) pairs. Free slots are filled first without
    preempting anyone; beyond that a waiting call preempts a runner only when its class (key[0])
    is strictly better by more than `min_class_gap`, so equal classes never swap (no thrash).
    """
    queue = sorted(waiting, key=lambda kv: kv[0])[max(free_slots, 0):]
    victims = sorted(running, key=lambda kv: kv[0], reverse=True)
    plan: list[Preemption] = []
    for (wkey, wid), (rkey, rid) in zip(queue, victims, strict=False):
        if not wkey[0] + min_class_gap < rkey[0]:
            break
        plan.append(Preemption(victim=rid, beneficiary=wid, reason=f"class {wkey[0]} < {rkey[0]}"))
    return plan
