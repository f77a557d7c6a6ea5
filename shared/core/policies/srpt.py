"""SRPT oracle: the program's remaining service, known in advance (a bound, not deployable)."""

from __future__ import annotations

from shared.core.mlfq import MlfqConfig
from shared.core.policies.base import CallView, Policy, PriorityKey


class Srpt(Policy):
    name = "srpt"
    description = "SRPT oracle: remaining program service (clairvoyant)"
    inputs = frozenset({"oracle_remaining_s"})

    def key(self, call: CallView, mlfq: MlfqConfig) -> PriorityKey:
        return (max(call.oracle_remaining_s - call.attained_s, 0.0), call.arrival_s, call.seq)

    def next_key_change_s(self, call: CallView, level: int, mlfq: MlfqConfig) -> float:
        return call.attained_s  # remaining work changes with every step

    def vllm_priority(self, key: PriorityKey) -> int:
        return int(min(key[0], 1e9) * 1000)  # remaining service in ms
