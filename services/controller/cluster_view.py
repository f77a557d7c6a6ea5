"""What the controller knows of the cluster, fed by snapshots and program-service updates.

Program state (S_p, W_p, epoch) is held in the same read-only view the engines hold
(`shared.engine.program_directory.CachedProgramDirectory`, over the core's `ProgramLedger`): an
update older than the one held is stale, and a closed session's late updates do not bring it back,
by one set of rules. A promotion is the controller's decision; the process table applies it and
its update (the new epoch, W and S reset) reaches this view like any other. The controller keeps
only its own decisions beside it: when it last promoted each program (the cooldown, which also
keeps a program from being promoted again before the table's update arrives).

No I/O here: the handlers feed it messages with the receive time, and `decide` asks the core's
`PromotionPlanner` (the same planner the simulator runs) whom to promote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.core.program import ServiceAggregation
from shared.core.promotion_planner import PromotionPlanner
from shared.core.starvation import ProgramTotals, StarvationConfig, WaitingCall
from shared.engine.program_directory import CachedProgramDirectory
from shared.lru import LRU
from shared.protocol import messages as m


@dataclass
class ClusterView:
    starvation: StarvationConfig
    cooldown_s: float
    snapshot_max_age_s: float
    max_programs: int = 100_000  # programs remembered, least recently used forgotten first (backstop)
    # programs whose session closed recently: updates of their last calls still arrive after the
    # close and must not bring them back (bounded: 50 closes a second for 5 minutes)
    max_closed: int = 16_384
    programs: CachedProgramDirectory = field(init=False)
    planner: PromotionPlanner = field(init=False)

    def __post_init__(self) -> None:
        # the controller folds no completions (it takes the table's S_p whole): the aggregation is unused
        self.programs = CachedProgramDirectory(ServiceAggregation.SUM, capacity=self.max_programs,
                                               closed_capacity=self.max_closed)
        self.planner = PromotionPlanner(self.starvation, self.cooldown_s, self.snapshot_max_age_s,
                                        max_programs=self.max_programs)

    @property
    def snapshots(self) -> dict[str, tuple[float, tuple[WaitingCall, ...]]]:
        return self.planner.snapshots

    @property
    def last_promoted_s(self) -> LRU[str, float]:
        return self.planner.last_promoted_s

    def on_snapshot(self, snapshot: m.EngineQueueSnapshot, now_s: float) -> None:
        self.planner.on_snapshot(
            snapshot.engine_id, (WaitingCall(w.program_id, w.wait_s, w.service_s) for w in snapshot.waiting), now_s)

    def on_program_service(self, update: m.ProgramServiceUpdated) -> None:
        if self.programs.has_ended(update.program_id):
            # an update comes after a completion: a one-call program has then ended, and a closed
            # session's straggler never needs a promotion decision (nor does anything remember it)
            self.forget(update.program_id)
            return
        # threads are the engines' business (no s_T kept here); an update from before a promotion
        # this view made is stale and changes nothing
        self.programs.apply_update(update.program_id, update.service_s, update.wait_s, {}, update.epoch,
                                   update.num_completed_calls)

    def on_session_closed(self, program_id: str) -> None:
        """Its session closed or expired: memory follows open programs, not history."""
        self.programs.close(program_id)
        self.planner.forget(program_id)

    def forget(self, program_id: str) -> None:
        self.programs.forget(program_id)
        self.planner.forget(program_id)

    def holds(self, program_id: str) -> bool:
        return program_id in self.programs or program_id in self.last_promoted_s

    @property
    def num_programs(self) -> int:
        return len(set(self.programs) | set(self.last_promoted_s))

    def totals(self, program_ids) -> dict[str, ProgramTotals]:
        """(W_p, S_p) of those of `program_ids` this view holds."""
        out = {}
        for program_id in program_ids:
            led = self.programs.get(program_id)
            if led is not None:
                out[program_id] = ProgramTotals(wait_s=led.wait_s, service_s=led.service_s)
        return out

    def decide(self, now_s: float) -> list[m.ProgramPromoted]:
        """Promotions to publish now (the planner records each for its cooldown): each names the
        epoch it moves the program to, which the table applies only from the epoch it was decided on."""
        return [m.ProgramPromoted(program_id=d.program_id, epoch=self.programs.ledger(d.program_id).epoch + 1,
                                  ratio=d.ratio, reason=d.reason)
                for d in self.planner.decide(now_s, self.totals)]
