"""ATLAS: PLAS with the program's service taken along its critical path (max over threads);
FCFS by program within a level and, inside a program, the critical path (largest s_T) first."""

from __future__ import annotations

from shared.core.mlfq import MlfqConfig
from shared.core.policies.base import CallView, PriorityKey
from shared.core.policies.plas import Plas
from shared.core.program import ServiceAggregation


class Atlas(Plas):
    name = "atlas"
    description = "ATLAS: critical-path attained service (max over threads)"
    aggregation = ServiceAggregation.CRITICAL_PATH

    def key(self, call: CallView, mlfq: MlfqConfig) -> PriorityKey:
        return (self.level(call, mlfq), call.program_arrival_s, -call.thread_service_s, call.arrival_s, call.seq)
