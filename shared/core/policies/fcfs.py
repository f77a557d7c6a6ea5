"""FCFS: arrival order; never preempts for priority (only KV exhaustion does, inside the engine)."""

from __future__ import annotations

from shared.core.mlfq import MlfqConfig
from shared.core.policies.base import CallView, Policy, PriorityKey


class Fcfs(Policy):
    name = "fcfs"
    description = "FCFS on the run's engine settings (optimized FCFS by default)"
    preemptive = False
    static_key = True

    def key(self, call: CallView, mlfq: MlfqConfig) -> PriorityKey:
        return (0, call.arrival_s, call.seq)
