"""The controller's anti-starvation decision as a pure object: who to promote, when, and cooldowns.

Production's controller (`services/controller/cluster_view.py`) and the simulator
(`loadgen/sim/controller.py`) both run this one class, fed the same inputs: each engine's
snapshot of its waiting calls, and the programs' (W_p, S_p) as the process table publishes them.
It only decides; applying a promotion (`ProgramLedger.promote`) is its caller's.

Pure: no clock (`now_s` comes in), no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from shared.core.starvation import (
    ProgramTotals,
    PromotionDecision,
    StarvationConfig,
    WaitingCall,
    plan_promotions,
)
from shared.lru import LRU

# the controller's defaults (ControllerSettings takes them from here, and so does the simulator)
DEFAULT_COOLDOWN_S = 5.0  # no ping-pong between promote and demote
DEFAULT_DECISION_INTERVAL_S = 0.5
DEFAULT_SNAPSHOT_MAX_AGE_S = 5.0  # an engine silent this long is ignored

TotalsOf = Callable[[set[str]], Mapping[str, ProgramTotals]]


@dataclass
class PromotionPlanner:
    starvation: StarvationConfig
    cooldown_s: float = DEFAULT_COOLDOWN_S
    snapshot_max_age_s: float = DEFAULT_SNAPSHOT_MAX_AGE_S
    max_programs: int = 100_000  # cooldowns remembered, least recently used forgotten first
    # engine id -> (when its snapshot was received, its waiting calls)
    snapshots: dict[str, tuple[float, tuple[WaitingCall, ...]]] = field(default_factory=dict)
    last_promoted_s: LRU[str, float] = field(init=False)

    def __post_init__(self) -> None:
        if not self.cooldown_s >= 0 or not self.snapshot_max_age_s > 0 or self.max_programs < 1:
            raise ValueError(f"cooldown_s must be >= 0, snapshot_max_age_s > 0 and max_programs >= 1, got "
                             f"{self.cooldown_s}, {self.snapshot_max_age_s}, {self.max_programs}")
        self.last_promoted_s = LRU(self.max_programs)

    def on_snapshot(self, engine_id: str, waiting: Iterable[WaitingCall], now_s: float) -> None:
        """An engine's waiting calls replace its previous snapshot."""
        self.snapshots[engine_id] = (now_s, tuple(waiting))

    def waiting_calls(self, now_s: float) -> list[WaitingCall]:
        """The waiting calls of every engine heard from within `snapshot_max_age_s`."""
        return [w for seen_s, waiting in self.snapshots.values() if now_s - seen_s <= self.snapshot_max_age_s
                for w in waiting]

    def decide(self, now_s: float, totals_of: TotalsOf) -> list[PromotionDecision]:
        """Programs to promote now (sorted by id); each starts its cooldown. `totals_of` answers
        (W_p, S_p) for the programs asked that its caller holds (the others count as (0, 0))."""
        waiting = self.waiting_calls(now_s)
        decisions = plan_promotions(self.starvation, waiting, totals_of({w.program_id for w in waiting}), now_s,
                                    self.last_promoted_s, self.cooldown_s)
        for d in decisions:
            self.last_promoted_s.put(d.program_id, now_s)
        return decisions

    def forget(self, program_id: str) -> None:
        self.last_promoted_s.pop(program_id)
