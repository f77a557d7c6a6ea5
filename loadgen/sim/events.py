"""The simulator's event heap: a virtual clock popped in (time, kind, seq) order.

Ties at the same instant are broken by event kind, then by insertion order, so a run is a pure
function of its inputs (no dict or id ordering leaks into the schedule).
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import Any


class EventKind(IntEnum):
    # completions first, so a call freed at t can unblock its children before anything else at t
    STEP_END = 0
    CALL_READY = 1
    PROGRAM_ARRIVAL = 2
    # the controller's decision round: after the calls of t are submitted, before steps start
    CONTROLLER_TICK = 3
    # last: a step that starts at t sees every call submitted (and every promotion made) at t
    STEP_START = 4


class EventQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0

    def push(self, time_s: float, kind: EventKind, payload: Any) -> None:
        heapq.heappush(self._heap, (time_s, int(kind), self._seq, payload))
        self._seq += 1

    def pop(self) -> tuple[float, EventKind, Any]:
        time_s, kind, _, payload = heapq.heappop(self._heap)
        return time_s, EventKind(kind), payload

    def __len__(self) -> int:
        return len(self._heap)
