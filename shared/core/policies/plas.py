"""PLAS: program-level least attained service. A new call inherits its program's level (S_p, the
sum over its calls) and is demoted by its own service; FCFS inside a level."""

from __future__ import annotations

from shared.core.mlfq import MlfqConfig
from shared.core.policies.base import CallView, LevelPolicy, PriorityKey


class Plas(LevelPolicy):
    name = "plas"
    description = "PLAS: program-level attained service (sum)"
    program_aware = True

    def level_base_s(self, call: CallView) -> float:
        return call.program_service_s

    def key(self, call: CallView, mlfq: MlfqConfig) -> PriorityKey:
        return (self.level(call, mlfq), call.arrival_s, call.seq)
