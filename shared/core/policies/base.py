"""The policy interface: what a scheduling policy decides, and what it needs to decide it.

A policy maps a call's scheduling view to a key; lower keys run first. The first element of every
key is the call's *class* (its MLFQ level, or remaining work for SRPT): preemption compares classes
only, so a call never preempts another of the same class (no thrash inside a level). Engines and
the simulator read a policy only through this interface; none switches on a policy's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from shared.core.mlfq import MlfqConfig
from shared.core.program import ServiceAggregation

PriorityKey = tuple
INPUTS = ("oracle_remaining_s", "expected_remaining_s")  # per-call inputs beyond the common view


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
    # SERPT and Gittins: the program's learned size rank at submit (the policy's `size_rank` of its
    # type's finished programs, shared/core/size_estimator.py); None: too few of its type yet
    expected_remaining_s: float | None = None


class Policy:
    """One scheduling policy. Subclass, set the class attributes, implement `key`."""

    name: ClassVar[str]  # the key users type (`--policy`, `SCHEDULING_POLICY`)
    description: ClassVar[str]
    has_levels: ClassVar[bool] = False  # MLFQ levels: demotion thresholds and anti-starvation promotions
    preemptive: ClassVar[bool] = True  # a better class displaces a runner (else: admission order only)
    program_aware: ClassVar[bool] = False  # a new call inherits its program's service
    aggregation: ClassVar[ServiceAggregation] = ServiceAggregation.SUM  # how S_p folds thread services
    static_key: ClassVar[bool] = False  # key fixed by arrival order alone (what stock vLLM FCFS does)
    inputs: ClassVar[frozenset[str]] = frozenset()  # of INPUTS: what the driver must supply per call
    # with input expected_remaining_s: which rank of the learned sizes the driver supplies in it
    size_rank: ClassVar[str] = "mean_excess"

    def key(self, call: CallView, mlfq: MlfqConfig) -> PriorityKey:
        raise NotImplementedError

    def level(self, call: CallView, mlfq: MlfqConfig) -> int:
        """MLFQ level of a call (0 for policies without levels)."""
        return 0

    def next_key_change_s(self, call: CallView, level: int, mlfq: MlfqConfig) -> float:
        """Attained service at which this call's key next changes by its own service alone
        (inf: never; keys also change when the program's ledger does)."""
        return math.inf

    def vllm_priority(self, key: PriorityKey) -> int:
        """vLLM's integer `priority` (lower first) for a key, where a stock vLLM orders by it."""
        return int(key[0]) if key else 0


class LevelPolicy(Policy):
    """MLFQ levels from the service counted so far: `level_base_s` plus the call's own."""

    has_levels = True

    def level_base_s(self, call: CallView) -> float:
        """Service counted towards the level besides the call's own attained service."""
        return 0.0

    def level(self, call: CallView, mlfq: MlfqConfig) -> int:
        return mlfq.level_for(self.level_base_s(call) + call.attained_s)

    def next_key_change_s(self, call: CallView, level: int, mlfq: MlfqConfig) -> float:
        if level >= mlfq.num_levels - 1:
            return math.inf
        return mlfq.threshold_s(level) - self.level_base_s(call)
