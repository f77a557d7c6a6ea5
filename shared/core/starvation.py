"""Anti-starvation: promote a program whose wait/service ratio reaches beta."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class StarvationConfig:
    """beta = None disables anti-starvation. The paper's useful range is 3-7.

    min_service_s floors the denominator so a program that has received almost no service is not
    promoted for waiting a few milliseconds (it is on level 0 already).
    """

    beta: float | None = 5.0
    min_service_s: float = 1.0

    def __post_init__(self) -> None:
        if self.beta is not None and not self.beta > 0:
            raise ValueError(f"beta must be > 0 or None, got {self.beta}")


def starvation_ratio(program_wait_s: float, program_service_s: float, call_wait_s: float,
                     call_service_s: float, min_service_s: float) -> float:
    """(W_p + w_call) / max(S_p + t_call, floor)."""
    return (program_wait_s + call_wait_s) / max(program_service_s + call_service_s, min_service_s)


def should_promote(cfg: StarvationConfig, program_wait_s: float, program_service_s: float,
                   call_wait_s: float, call_service_s: float) -> bool:
    if cfg.beta is None:
        return False
    ratio = starvation_ratio(program_wait_s, program_service_s, call_wait_s, call_service_s, cfg.min_service_s)
    return ratio >= cfg.beta


@dataclass(frozen=True)
class WaitingCall:
    """One queued call as an engine's queue snapshot reports it."""

    program_id: str
    call_wait_s: float
    call_service_s: float


@dataclass
class CallQueueing:
    """A call's time queued and service so far, as its engine agent sees them from step reports:
    what a queue snapshot reports of it (`WaitingCall`). A preempted call has both; service is the
    engine time of the steps that gave it tokens (a prefill chunk without a token is not seen)."""

    waiting_since_s: float | None  # None while it runs; a new call waits since its submission
    service_s: float = 0.0
    queued_s: float = 0.0  # queued before the current wait

    def ran(self, end_s: float, duration_s: float) -> None:
        """A step that gave it tokens ended at end_s."""
        if self.waiting_since_s is not None:
            self.queued_s += max(end_s - duration_s - self.waiting_since_s, 0.0)
            self.waiting_since_s = None
        self.service_s += duration_s

    def preempted(self, at_s: float) -> None:
        if self.waiting_since_s is None:
            self.waiting_since_s = at_s

    def promoted(self, now_s: float) -> None:
        """Its program was promoted: its wait and service count from now, as W_p and S_p do."""
        self.queued_s = self.service_s = 0.0
        if self.waiting_since_s is not None:
            self.waiting_since_s = now_s

    def wait_s(self, now_s: float) -> float:
        waiting = max(now_s - self.waiting_since_s, 0.0) if self.waiting_since_s is not None else 0.0
        return self.queued_s + waiting


@dataclass(frozen=True)
class ProgramTotals:
    wait_s: float  # W_p over completed calls
    service_s: float  # S_p


@dataclass(frozen=True)
class PromotionDecision:
    program_id: str
    ratio: float
    reason: str


def plan_promotions(
    cfg: StarvationConfig,
    waiting: list[WaitingCall],
    programs: Mapping[str, ProgramTotals],
    now_s: float,
    last_promoted_s: Mapping[str, float],
    cooldown_s: float,
) -> list[PromotionDecision]:
    """Cluster-wide anti-starvation: which programs to promote now.

    A program is judged by its worst-waiting queued call. A program promoted less than
    `cooldown_s` ago is left alone so a promotion and the next demotion cannot ping-pong.
    Decisions are sorted by program id for determinism.
    """
    if cfg.beta is None:
        return []
    worst: dict[str, WaitingCall] = {}
    for call in waiting:
        cur = worst.get(call.program_id)
        if cur is None or call.call_wait_s > cur.call_wait_s:
            worst[call.program_id] = call
    decisions = []
    for program_id in sorted(worst):
        last = last_promoted_s.get(program_id)
        if last is not None and now_s - last < cooldown_s:
            continue
        call = worst[program_id]
        totals = programs.get(program_id, ProgramTotals(0.0, 0.0))
        ratio = starvation_ratio(totals.wait_s, totals.service_s, call.call_wait_s, call.call_service_s,
                                 cfg.min_service_s)
        if ratio >= cfg.beta:
            decisions.append(PromotionDecision(program_id, ratio, f"wait/service {ratio:.2f} >= beta {cfg.beta}"))
    return decisions
