"""What the API knows of each engine from its heartbeats: when it was last heard (live within
`engine_ttl_s`), its incarnation (a restart lost its calls), and whether it went silent alone.

A silent engine's calls are waited for a while (stream_machine.py), because a stall of the whole
host silences engines that are alive. After such a stall every live engine beats again within
one interval, so when another engine has sent `BEATS_FOR_SILENT_ALONE` heartbeats since the silent
one's last, the silent one is gone (killed, or cut off), not stalled."""

from __future__ import annotations

from collections import deque

BEATS_FOR_SILENT_ALONE = 3


class EngineBeats:
    def __init__(self) -> None:
        self._beats: dict[str, deque[float]] = {}  # each engine's last heartbeat times, newest last
        self._started_ns: dict[str, int] = {}

    def observe(self, engine_id: str, started_at_ns: int, now_s: float) -> None:
        beats = self._beats.get(engine_id)
        if beats is None:
            beats = self._beats[engine_id] = deque(maxlen=BEATS_FOR_SILENT_ALONE)
        beats.append(now_s)
        # an engine restarted within engine_ttl_s never looks dead, but lost its calls all the same
        self._started_ns[engine_id] = started_at_ns

    def incarnation(self, engine_id: str) -> int:
        return self._started_ns.get(engine_id, 0)

    def is_live(self, engine_id: str, now_s: float, ttl_s: float) -> bool:
        beats = self._beats.get(engine_id)
        return beats is not None and now_s - beats[-1] <= ttl_s

    def live(self, now_s: float, ttl_s: float) -> list[str]:
        return sorted(e for e in self._beats if self.is_live(e, now_s, ttl_s))

    def silent_alone(self, engine_id: str) -> bool:
        beats = self._beats.get(engine_id)
        last = beats[-1] if beats else float("-inf")
        return any(other != engine_id and len(others) == BEATS_FOR_SILENT_ALONE and others[0] > last
                   for other, others in self._beats.items())
