"""Scheduling policies as priority keys: FCFS, per-call MLFQ, PLAS, ATLAS, SERPT and the SRPT oracle.

A policy maps a call's scheduling view to a key; lower keys run first. The first element of every
key is the call's *class* (its MLFQ level, or remaining work for SRPT): preemption compares classes
only, so a call never preempts another of the same class (no thrash inside a level).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from shared.core.mlfq import MlfqConfig
from shared.core.program import ServiceAggregation


class PolicyName(StrEnum):
    FCFS = "fcfs"
    MLFQ = "mlfq"
    PLAS = "plas"
    ATLAS = "atlas"
    SRPT = "srpt"
    SERPT = "serpt"


def parse_policy(name: str) -> PolicyName:
    try:
        return PolicyName(name.strip().lower())
    except ValueError:
        valid = ", ".join(p.value for p in PolicyName)
        raise ValueError(f"unknown policy {name!r}; valid policies: {valid}") from None


@dataclass(frozen=True)
class CallView:
    """What a policy may see of one call (all times in seconds on the caller's clock)."""

    arrival_s: float  # when the call was submitted to the engine
    seq: int  # global submission order: deterministic tie-break
    attained_s: float  # this call's own service since its program's last promotion
    program_service_s: float  # S_p now (PLAS sum or ATLAS max)
    thread_service_s: float  # s_T of the call's thread now (ATLAS critical path)
    program_arrival_s: float  # when the program started
    oracle_remaining_s: float = 0.0  # SRPT only: remaining total service of the program
    # SERPT only: the program's expected remaining service at submit, learned from finished
    # programs of its type (shared/core/size_estimator.py); None: too few of its type yet
    expected_remaining_s: float | None = None


PriorityKey = tuple


@dataclass(frozen=True)
class SchedulingPolicy:
    name: PolicyName
    mlfq: MlfqConfig = MlfqConfig()

    @property
    def aggregation(self) -> ServiceAggregation:
        return ServiceAggregation.CRITICAL_PATH if self.name is PolicyName.ATLAS else ServiceAggregation.SUM

    @property
    def preemptive(self) -> bool:
        """FCFS never preempts for priority (only KV exhaustion does, inside the engine); SERPT
        orders admission only (a mis-estimate never evicts a running call)."""
        return self.name not in (PolicyName.FCFS, PolicyName.SERPT)

    @property
    def program_aware(self) -> bool:
        return self.name in (PolicyName.PLAS, PolicyName.ATLAS)

    def level(self, call: CallView) -> int:
        """MLFQ level of a call (0 for FCFS and SRPT, which have no levels)."""
        if self.name is PolicyName.MLFQ:
            return self.mlfq.level_for(call.attained_s)
        if self.program_aware:
            # a new call inherits its program's level; demotion by its own attained service
            return self.mlfq.level_for(call.program_service_s + call.attained_s)
        return 0

    def vllm_priority(self, key: PriorityKey) -> int:
        """vLLM's integer `priority` (lower first) for a key: where a stock vLLM orders by it."""
        if self.name is PolicyName.SRPT:
            return int(min(key[0], 1e9) * 1000)  # remaining service in ms
        return int(key[0]) if key else 0

    def key(self, call: CallView) -> PriorityKey:
        match self.name:
            case PolicyName.FCFS:
                return (0, call.arrival_s, call.seq)
            case PolicyName.MLFQ | PolicyName.PLAS:
                return (self.level(call), call.arrival_s, call.seq)
            case PolicyName.ATLAS:
                # FCFS by program within a level; inside a program, critical path (largest s_T) first
                return (self.level(call), call.program_arrival_s, -call.thread_service_s, call.arrival_s, call.seq)
            case PolicyName.SRPT:
                remaining = max(call.oracle_remaining_s - call.attained_s, 0.0)
                return (remaining, call.arrival_s, call.seq)
            case PolicyName.SERPT:
                # one class: admission order only. A type with too few finished programs falls back
                # to least attained service (expected remaining = what it has had)
                expected = call.expected_remaining_s
                if expected is None:
                    expected = call.program_service_s
                return (0, expected, call.program_arrival_s, -call.thread_service_s, call.arrival_s, call.seq)
        raise AssertionError(self.name)
