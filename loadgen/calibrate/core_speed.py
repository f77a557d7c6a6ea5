"""How fast one core runs right now: a fixed pure-Python loop timed in CPU time on that core.

On these 2-core VMs the live engine's steps ran 1.16x-1.58x what the same hour's profile predicts,
from one run to the next, with no steal time in /proc/stat. The engine core's own CPU time for the
same small step moved with the step's wall time (their ratio stayed at 5.6-5.9): the core itself ran
slower, whatever the policy. A profile taken at one minute therefore mis-predicts a run at another by
as much as the policies differ. Probing the worker's core when the profile is taken and around each
live run (the stack idle) puts a number on that speed, so a run can be read against the machine it
actually had.

CPU time, not wall time: what the probe measures is how long the core takes for fixed work, not
whether another thread (vLLM's worker spins for a second after each step) shared it meanwhile.
"""

from __future__ import annotations

import os
import statistics
import time

LOOP = 200_000  # iterations per trial: a few ms on these cores, short of a scheduler tick's share
TRIALS = 15


def _trial() -> float:
    start = time.thread_time()
    total = 0
    for i in range(LOOP):
        total += i * i & 7
    return (time.thread_time() - start) / LOOP * 1e9


def probe(cpu: int, trials: int = TRIALS) -> dict:
    """Median ns of CPU per loop iteration on `cpu`, with this thread pinned there for the probe
    (its own affinity restored after)."""
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        runs = [_trial() for _ in range(trials)]
    finally:
        os.sched_setaffinity(0, before)
    return {"cpu": cpu, "ns_per_iteration": statistics.median(runs), "min": min(runs), "max": max(runs),
            "trials": trials}


def around(before: dict, after: dict) -> dict:
    """A run's speed: the probes just before and just after it, and their mean."""
    return {"before": before, "after": after,
            "ns_per_iteration": (before["ns_per_iteration"] + after["ns_per_iteration"]) / 2}


def slowdown(run: dict, reference: dict) -> float:
    """How much slower the core ran for `run` than for `reference` (both `around` records)."""
    return run["ns_per_iteration"] / reference["ns_per_iteration"]
