"""Expected remaining work of a program, learned online from finished programs of the same type.

No oracle: each agent type (a workload name, or the type a client declares for its session) keeps a
bounded window of the total service its recent programs received. Two ranks (seconds, lower runs
first) of a running program that has attained `a` seconds are read from that window:
- `mean_excess`: E[X - a | X > a], the expected remaining service (SERPT);
- `gittins`: the Gittins rank, min over quanta d of E[min(X - a, d) | X > a] / P(X - a <= d | X > a),
  the expected service per unit of probability of finishing within the best next quantum. It is
  never above the mean excess (d = the largest sample gives the mean excess), and lower for a
  program about to reach a size many programs of its type stop at. Over the window's samples the
  minimum is taken at the samples above `a`.
A program longer than every sample so far ranks as what it has had (the least-attained order, with
no claim of knowing more).

Pure and deterministic: the window holds the last `window` samples in arrival order, with a sorted
copy and its suffix sums rebuilt on each new sample (programs finish rarely compared with
scheduling decisions). A mean-excess query is O(log n); a Gittins query walks the samples above
`a`, O(n) (n <= 256: tens of microseconds, once per call at submit or per session lookup).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

from shared.lru import LRU

RANKS = ("mean_excess", "gittins")  # what a policy can order by (Policy.size_rank)


@dataclass(frozen=True)
class SizeEstimatorConfig:
    window: int = 256  # samples kept per type: recent programs, so a drifting mix is followed
    min_samples: int = 8  # below this a type has no estimate (the policy falls back)
    max_types: int = 1024  # distinct types tracked; the least recently fed one is forgotten

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_samples < 1 or self.max_types < 1:
            raise ValueError("window, min_samples and max_types must be >= 1")
        if self.min_samples > self.window:
            raise ValueError(f"min_samples ({self.min_samples}) cannot exceed window ({self.window})")


class _TypeSketch:
    __slots__ = ("recent", "sorted", "suffix")

    def __init__(self, window: int) -> None:
        self.recent: deque[float] = deque(maxlen=window)
        self.sorted: list[float] = []
        self.suffix: list[float] = [0.0]  # suffix[i] = sum(sorted[i:])

    def add(self, total_s: float) -> None:
        if len(self.recent) == self.recent.maxlen:
            oldest = self.recent[0]
            del self.sorted[bisect.bisect_left(self.sorted, oldest)]
        self.recent.append(total_s)
        bisect.insort(self.sorted, total_s)
        suffix = [0.0] * (len(self.sorted) + 1)
        for i in range(len(self.sorted) - 1, -1, -1):
            suffix[i] = suffix[i + 1] + self.sorted[i]
        self.suffix = suffix

    def mean_excess(self, attained_s: float) -> float | None:
        """E[X - a | X > a] over the window; None when no sample exceeds a."""
        i = bisect.bisect_right(self.sorted, attained_s)
        above = len(self.sorted) - i
        if above == 0:
            return None
        return self.suffix[i] / above - attained_s

    def gittins_rank(self, attained_s: float) -> float | None:
        """min over the samples y_k above a of (sum_{i<=k} (y_i - a) + (m - k)(y_k - a)) / k, m the
        samples above a (E[min(X - a, y_k - a)] / P(X <= y_k), both given X > a); None when no
        sample exceeds a. Ties are taken at their last index (a quantum ends at a value, not inside it)."""
        ys = self.sorted
        i = bisect.bisect_right(ys, attained_s)
        m = len(ys) - i
        if m == 0:
            return None
        best = math.inf
        done = 0.0  # sum of (y - a) over the samples up to k
        for k in range(1, m + 1):
            excess = ys[i + k - 1] - attained_s
            done += excess
            if k < m and ys[i + k] == ys[i + k - 1]:
                continue
            best = min(best, (done + (m - k) * excess) / k)
        return best


class SizeEstimator:
    """Per-type windows of finished programs' total service; one owner feeds it (the simulator,
    or the process table's completed programs), schedulers only query it."""

    def __init__(self, config: SizeEstimatorConfig | None = None) -> None:
        self.config = config or SizeEstimatorConfig()
        self._types: LRU[str, _TypeSketch] = LRU(self.config.max_types)

    def observe(self, program_type: str, total_service_s: float) -> None:
        """A program of `program_type` finished having received `total_service_s` of service."""
        if not total_service_s >= 0 or total_service_s == float("inf"):
            raise ValueError(f"total_service_s must be finite and >= 0, got {total_service_s!r}")
        sketch = self._types.touch(program_type)  # fed: the most recent, forgotten last
        if sketch is None:
            sketch = _TypeSketch(self.config.window)
            self._types.put(program_type, sketch)
        sketch.add(float(total_service_s))

    def samples(self, program_type: str) -> int:
        sketch = self._types.get(program_type)
        return len(sketch.recent) if sketch is not None else 0

    def expected_remaining_s(self, program_type: str | None, attained_s: float) -> float | None:
        """Expected remaining service of a program that attained `attained_s`; None when the type
        has fewer than `min_samples` finished programs (the caller falls back to its own order)."""
        return self.rank_s(program_type, attained_s, "mean_excess")

    def rank_s(self, program_type: str | None, attained_s: float, rank: str) -> float | None:
        """The program's `rank` (one of RANKS) at `attained_s`; None when the type has fewer than
        `min_samples` finished programs (the caller falls back to its own order)."""
        if rank not in RANKS:
            raise ValueError(f"unknown size rank {rank!r}; valid ranks: {', '.join(RANKS)}")
        if program_type is None:
            return None
        sketch = self._types.get(program_type)
        if sketch is None or len(sketch.recent) < self.config.min_samples:
            return None
        value = sketch.mean_excess(attained_s) if rank == "mean_excess" else sketch.gittins_rank(attained_s)
        return attained_s if value is None else value
