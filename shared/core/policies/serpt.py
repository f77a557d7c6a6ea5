"""SERPT: expected remaining program service, learned online per workload from finished programs.
Admission order only (one class: a mis-estimate never evicts a running call); a type with too
few finished programs falls back to least attained service (expected remaining = what it has had)."""

from __future__ import annotations

from shared.core.mlfq import MlfqConfig
from shared.core.policies.base import CallView, Policy, PriorityKey


class Serpt(Policy):
    name = "serpt"
    description = ("SERPT: expected remaining program service, learned online per workload from finished "
                   "programs (admission order only, no oracle)")
    preemptive = False
    inputs = frozenset({"expected_remaining_s"})

    def key(self, call: CallView, mlfq: MlfqConfig) -> PriorityKey:
        expected = call.expected_remaining_s
        if expected is None:
            expected = call.program_service_s
        return (0, expected, call.program_arrival_s, -call.thread_service_s, call.arrival_s, call.seq)

    def vllm_priority(self, key: PriorityKey) -> int:
        return round(1000 * key[1])  # expected remaining service in ms (the class is always 0)
