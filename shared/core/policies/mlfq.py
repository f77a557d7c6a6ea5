"""Per-call MLFQ: every new call enters level 0 and is demoted by its own service."""

from __future__ import annotations

from shared.core.mlfq import MlfqConfig
from shared.core.policies.base import CallView, LevelPolicy, PriorityKey


class Mlfq(LevelPolicy):
    name = "mlfq"
    description = "per-call MLFQ (every new call enters level 0)"

    def key(self, call: CallView, mlfq: MlfqConfig) -> PriorityKey:
        return (self.level(call, mlfq), call.arrival_s, call.seq)
