"""The simulator's controller: production's promotion planner fed what production feeds it.

Each engine agent snapshots its waiting calls (`services/engine_agent/handlers.py`,
`queue_snapshot`): a call counts as waiting until its first token and again from a preemption
to its next token, with its time queued and its service so far as the agent counts them from
its step reports (`CallQueueing`), both from its program's last promotion (the agent resets them
on the promotion event). The controller (`services/controller/cluster_view.py`) judges those
against the programs' (W_p, S_p) from the process table with the core's `PromotionPlanner`, and the table
applies each promotion with `ProgramLedger.promote`. Here the table is the simulator's shared
directory, so engines see a promotion at their next key refresh, as they would see its update.

What differs from production: every engine's snapshot is taken at the decision tick itself
(production's are up to one snapshot interval old, at their own phases), and the table's (W_p,
S_p) is current (production's controller holds the last update it received).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared.core.promotion_planner import DEFAULT_DECISION_INTERVAL_S, PromotionPlanner
from shared.core.starvation import CallQueueing, ProgramTotals, StarvationConfig, WaitingCall
from shared.engine.api import DictProgramDirectory, StepReport


@dataclass(slots=True)
class _Waiting:
    program_id: str
    queueing: CallQueueing


class SimController:
    def __init__(self, starvation: StarvationConfig, directory: DictProgramDirectory,
                 decision_interval_s: float = DEFAULT_DECISION_INTERVAL_S) -> None:
        if not decision_interval_s > 0:
            raise ValueError(f"decision_interval_s must be > 0, got {decision_interval_s}")
        self.planner = PromotionPlanner(starvation)
        self.decision_interval_s = decision_interval_s
        self._directory = directory
        # engine id -> its calls that would appear in its snapshot (call id -> program, submit time)
        self._waiting: dict[str, dict[str, _Waiting]] = {}
        self._submitted: dict[str, _Waiting] = {}  # every call in flight, to re-queue a preempted one
        self.num_promotions = 0

    def on_submit(self, engine_id: str, call_id: str, program_id: str, now_s: float) -> None:
        entry = _Waiting(program_id, CallQueueing(waiting_since_s=now_s))
        self._submitted[call_id] = entry
        self._waiting.setdefault(engine_id, {})[call_id] = entry

    def on_step_end(self, engine_id: str, report: StepReport, end_s: float) -> None:
        """As the engine agent's `on_step`: a token ends a call's wait, a preemption starts one."""
        waiting = self._waiting.setdefault(engine_id, {})
        for done in report.finished:
            waiting.pop(done.call_id, None)
            self._submitted.pop(done.call_id, None)
        for call_id in report.tokens_emitted:
            entry = self._submitted.get(call_id)
            if entry is not None:
                entry.queueing.ran(end_s, report.duration_s)
                waiting.pop(call_id, None)
        for call_id in report.preempted:
            entry = self._submitted.get(call_id)
            if entry is not None:
                entry.queueing.preempted(end_s)
                waiting[call_id] = entry

    def has_waiting(self) -> bool:
        """Whether a round could decide anything (one with nothing waiting changes nothing)."""
        return any(self._waiting.values())

    def next_round_s(self, now_s: float) -> float:
        """The first round at or after now_s on the controller's grid (every decision interval)."""
        at_s = math.ceil(now_s / self.decision_interval_s) * self.decision_interval_s
        return at_s if at_s >= now_s else at_s + self.decision_interval_s

    def tick(self, now_s: float) -> list[str]:
        """One decision round: snapshots in, promotions applied to the table; returns the promoted."""
        for engine_id, waiting in self._waiting.items():
            self.planner.on_snapshot(
                engine_id, [WaitingCall(w.program_id, w.queueing.wait_s(now_s), w.queueing.service_s)
                            for w in waiting.values()], now_s)
        promoted = [d.program_id for d in self.planner.decide(now_s, self._totals)]
        for program_id in promoted:
            self._directory.promote(program_id)
        if promoted:  # each engine agent, on the promotion event: its calls' wait counts from now
            chosen = set(promoted)
            for entry in self._submitted.values():
                if entry.program_id in chosen:
                    entry.queueing.promoted(now_s)
        self.num_promotions += len(promoted)
        return promoted

    def _totals(self, program_ids: set[str]) -> dict[str, ProgramTotals]:
        ledgers = self._directory.ledgers
        return {p: ProgramTotals(ledgers[p].wait_s, ledgers[p].service_s) for p in program_ids if p in ledgers}

    def forget(self, program_id: str) -> None:
        """A finished program's cooldown (production: its session closed)."""
        self.planner.forget(program_id)
