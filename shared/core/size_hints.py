"""A client's hint of how many LLM calls its program still makes, turned into expected remaining
service once that client's hints have been checked against what its programs then received.

Why calls: an agent often knows its plan (a map-reduce its chunk count, a planner its steps, a
loop its step budget) but not how many tokens each call will take. Why a check: a hint is a
claim by a client, and some clients are adversarial. So hints are trusted per *source* (in
production a tenant's workload class; in the simulator a workload) and only in proportion:
- a source's hints count only once `min_samples` of its finished programs have been checked
  (before that its programs rank as if they gave no hint: the learned order);
- a hint of h calls means h x the source's own service per hinted call, the ratio of sums over its
  last `window` checked programs (what they received after their first hint, over what that hint
  said). A source that scales all its hints by k gets exactly the same estimates; one that always
  hints the same number gets its programs' mean size, what a source with no hint gets at the start.
  Lying buys nothing once checked; only a hint that orders the source's own programs helps it.

Pure and deterministic; one owner feeds it (the simulator, or the process table's closed sessions).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from shared.lru import LRU

MAX_HINT_CALLS = 100_000  # a program announcing more calls than this is refused at the edge


def check_hint_calls(value: object) -> int:
    """The hint as an int in [1, MAX_HINT_CALLS], or ValueError saying why not."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"remaining_calls must be a whole number, got {type(value).__name__}")
    if not 1 <= value <= MAX_HINT_CALLS:
        raise ValueError(f"remaining_calls must be between 1 and {MAX_HINT_CALLS}, got {value}")
    return value


def hinted_or_learned(hint_calls: int | None, scale_s: float | None, learned_s: float | None) -> float | None:
    """A call's expected remaining service: its hint times its source's checked scale when both
    are there, else the learned rank (None: neither)."""
    if hint_calls is not None and scale_s is not None:
        return hint_calls * scale_s
    return learned_s


@dataclass(frozen=True)
class HintTrustConfig:
    window: int = 64  # checked programs kept per source: a source that changes its ways is followed
    min_samples: int = 8  # checked programs before a source's hints count at all
    max_sources: int = 1024  # sources tracked; the least recently fed one is forgotten

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_samples < 1 or self.max_sources < 1:
            raise ValueError("window, min_samples and max_sources must be >= 1")
        if self.min_samples > self.window:
            raise ValueError(f"min_samples ({self.min_samples}) cannot exceed window ({self.window})")


class _SourceWindow:
    __slots__ = ("pairs", "hinted", "received")

    def __init__(self, window: int) -> None:
        self.pairs: deque[tuple[int, float]] = deque(maxlen=window)
        self.hinted = 0
        self.received = 0.0

    def add(self, hinted_calls: int, received_s: float) -> None:
        if len(self.pairs) == self.pairs.maxlen:
            old_h, old_r = self.pairs[0]
            self.hinted -= old_h
            self.received -= old_r
        self.pairs.append((hinted_calls, received_s))
        self.hinted += hinted_calls
        # re-summed rather than running, so no rounding drift builds up over a long life
        self.received = math.fsum(r for _, r in self.pairs)


class HintCalibrator:
    """Per-source windows of (first hint, service received from then on) of finished programs."""

    def __init__(self, config: HintTrustConfig | None = None) -> None:
        self.config = config or HintTrustConfig()
        self._sources: LRU[str, _SourceWindow] = LRU(self.config.max_sources)

    def observe(self, source: str, hinted_calls: int, received_s: float) -> None:
        """A program of `source` finished; its first hint said `hinted_calls` and it then received
        `received_s` of service."""
        check_hint_calls(hinted_calls)
        if not received_s >= 0 or received_s == math.inf:
            raise ValueError(f"received_s must be finite and >= 0, got {received_s!r}")
        window = self._sources.touch(source)
        if window is None:
            window = _SourceWindow(self.config.window)
            self._sources.put(source, window)
        window.add(hinted_calls, float(received_s))

    def checked(self, source: str) -> int:
        window = self._sources.get(source)
        return len(window.pairs) if window is not None else 0

    def scale_s(self, source: str) -> float | None:
        """Service per hinted call of this source; None while its hints are not trusted yet."""
        window = self._sources.get(source)
        if window is None or len(window.pairs) < self.config.min_samples:
            return None
        return window.received / window.hinted

    def expected_remaining_s(self, source: str, hinted_calls: int) -> float | None:
        """What a hint of `hinted_calls` from this source means in seconds of service; None while
        the source is not trusted (the caller uses its learned rank)."""
        return hinted_or_learned(hinted_calls, self.scale_s(source), None)
