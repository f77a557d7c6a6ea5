"""Simulated clients that hint how many calls their program still makes (the input of
shared/core/size_hints.py), and the run's check of those hints.

A client knows its plan's length, not its calls' sizes: the hint at each call is the number of the
program's calls not finished yet (this one included), times one log-normal error per program
(median 1, log-sigma `sigma`; 0: the plan is known exactly), rounded, at least 1. The error is
drawn from the run's seed and the program's id only, so every policy of a run sees the same hints.
The source of trust is the workload (one tenant per workload in the simulator).
"""

from __future__ import annotations

import math
import random

from loadgen.sim.program_run import ProgramRun
from shared.core.size_hints import MAX_HINT_CALLS, HintCalibrator


class SimulatedHints:
    def __init__(self, sigma: float, seed: int) -> None:
        if not (sigma >= 0 and math.isfinite(sigma)):
            raise ValueError(f"hint sigma must be finite and >= 0, got {sigma!r}")
        self.sigma = sigma
        self.seed = seed
        self.calibrator = HintCalibrator()
        self._errors: dict[str, float] = {}
        self._first: dict[str, tuple[int, float]] = {}  # program -> (its first hint, service then)

    def _error(self, program_id: str) -> float:
        error = self._errors.get(program_id)
        if error is None:
            rng = random.Random(f"size-hint:{self.seed}:{program_id}")
            error = math.exp(self.sigma * rng.gauss(0.0, 1.0)) if self.sigma > 0 else 1.0
            self._errors[program_id] = error
        return error

    def hint(self, run: ProgramRun) -> int:
        unfinished = len(run.spec.calls) - run.num_finished
        return max(1, min(MAX_HINT_CALLS, round(unfinished * self._error(run.spec.program_id))))

    def hint_and_scale(self, run: ProgramRun) -> tuple[int, float | None]:
        """The call's hint, and its workload's service per hinted call once trusted (else None)."""
        hinted = self.hint(run)
        self._first.setdefault(run.spec.program_id, (hinted, run.service_s))
        return hinted, self.calibrator.scale_s(run.spec.workload)

    def finished(self, run: ProgramRun) -> None:
        """Check the program's first hint against what it received from then on."""
        self._errors.pop(run.spec.program_id, None)
        first = self._first.pop(run.spec.program_id, None)
        if first is not None:
            hinted, service_then = first
            self.calibrator.observe(run.spec.workload, hinted, max(run.service_s - service_then, 0.0))
