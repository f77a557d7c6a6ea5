"""Calls in flight per program, so idle expiry never closes a session that is still being served.

The table hears each call enter (the API's `call.submitted` event, core NATS) and leave (its
completion, applied). A session whose call is still running is not idle, however long the call
takes. An entry older than `max_age_s` (the overall call deadline, CALL_DEADLINE_S, plus a margin:
the API has failed and cancelled such a call by then) is dropped, so a lost completion or a lost
submission cannot pin a session open for ever, and memory stays bounded by the calls of the
last `max_age_s` (and `max_calls`, the backstop).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from shared.lru import LRU

MAX_CALLS = 1_000_000


class InFlightCalls:
    def __init__(self, max_age_s: float, max_calls: int = MAX_CALLS, clock=time.monotonic) -> None:
        self.max_age_s = max_age_s
        self._clock = clock
        self._calls: LRU[str, tuple[str, float]] = LRU(max_calls)  # call id -> (program, since)

    def submitted(self, program_id: str, call_id: str) -> None:
        self._calls.put(call_id, (program_id, self._clock()))

    def completed(self, call_ids: Iterable[str]) -> None:
        for call_id in call_ids:
            self._calls.pop(call_id, None)

    def busy_programs(self) -> list[str]:
        """Programs with a call in flight (and forget the entries past their age)."""
        cutoff = self._clock() - self.max_age_s
        while (entry := self._calls.oldest()) is not None and entry[1][1] < cutoff:
            self._calls.pop(entry[0])
        return sorted({program for program, _ in self._calls.values()})

    def __len__(self) -> int:
        return len(self._calls)
