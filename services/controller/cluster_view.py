"""What the controller knows of the cluster, fed by snapshots and program-service updates.

No I/O here: the handlers feed it messages with the receive time, and `decide` asks the pure core.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.core.starvation import (
    ProgramTotals,
    PromotionDecision,
    StarvationConfig,
    WaitingCall,
    plan_promotions,
)
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol.programs import is_one_call_program


@dataclass
class ClusterView:
    starvation: StarvationConfig
    cooldown_s: float
    snapshot_max_age_s: float
    snapshots: dict[str, tuple[float, m.EngineQueueSnapshot]] = field(default_factory=dict)
    totals: dict[str, ProgramTotals] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    last_promoted_s: dict[str, float] = field(default_factory=dict)
    max_programs: int = 100_000  # programs remembered, least recently updated forgotten first (backstop)
    # programs whose session closed recently: updates of their last calls still arrive after the
    # close and must not bring them back (bounded: 50 closes a second for 5 minutes)
    max_closed: int = 16_384
    closed: LRU[str, None] = field(init=False)

    def __post_init__(self) -> None:
        self.closed = LRU(self.max_closed)

    def on_snapshot(self, snapshot: m.EngineQueueSnapshot, now_s: float) -> None:
        self.snapshots[snapshot.engine_id] = (now_s, snapshot)

    def on_program_service(self, update: m.ProgramServiceUpdated) -> None:
        if update.program_id in self.closed or is_one_call_program(update.program_id):
            # an update comes after a completion: a one-call program has then ended, and a closed
            # session's straggler never needs a promotion decision (nor does anything remember it)
            self.forget(update.program_id)
            return
        if update.epoch < self.epochs.get(update.program_id, 0):
            return  # from before a promotion we already made: stale
        # re-inserted so dict order is update order; without a bound these grew by one entry per
        # program ever seen (`autellix hold`: +1 MiB a minute at 48 one-call programs/s)
        self.epochs.pop(update.program_id, None)
        self.totals.pop(update.program_id, None)
        self.epochs[update.program_id] = update.epoch
        self.totals[update.program_id] = ProgramTotals(wait_s=update.wait_s, service_s=update.service_s)
        while len(self.totals) > self.max_programs:
            self.forget(next(iter(self.totals)))

    def on_session_closed(self, program_id: str) -> None:
        """Its session closed or expired: memory follows open programs, not history."""
        self.forget(program_id)
        self.closed.put(program_id, None)

    def forget(self, program_id: str) -> None:
        for table in (self.totals, self.epochs, self.last_promoted_s):
            table.pop(program_id, None)

    @property
    def num_programs(self) -> int:
        return len(self.totals.keys() | self.epochs.keys() | self.last_promoted_s.keys())

    def waiting_calls(self, now_s: float) -> list[WaitingCall]:
        fresh = [snap for seen_s, snap in self.snapshots.values() if now_s - seen_s <= self.snapshot_max_age_s]
        return [WaitingCall(w.program_id, w.wait_s, w.service_s) for snap in fresh for w in snap.waiting]

    def decide(self, now_s: float) -> list[m.ProgramPromoted]:
        """Promotions to publish now; the view records them (new epoch, W and S reset, cooldown)."""
        decisions: list[PromotionDecision] = plan_promotions(
            self.starvation, self.waiting_calls(now_s), self.totals, now_s, self.last_promoted_s,
            self.cooldown_s)
        promoted = []
        for d in decisions:
            epoch = self.epochs.get(d.program_id, 0) + 1
            self.epochs[d.program_id] = epoch
            self.totals[d.program_id] = ProgramTotals(0.0, 0.0)
            self.last_promoted_s[d.program_id] = now_s
            promoted.append(m.ProgramPromoted(program_id=d.program_id, epoch=epoch, ratio=d.ratio, reason=d.reason))
        return promoted
