"""Live engines as seen through their heartbeats: an engine joins with its first heartbeat and
leaves when it says so or when `ttl_s` passes without one. No clock inside: callers pass `now_s`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EngineState:
    engine_id: str
    load: float  # queued plus running work (tokens still to process), as the engine reports it
    num_waiting: int
    num_running: int
    kv_used_blocks: int
    kv_total_blocks: int
    last_seen_s: float
    draining: bool = False  # alive (its streams go on) but takes no new call


class EngineTable:
    def __init__(self, ttl_s: float) -> None:
        if not ttl_s > 0:
            raise ValueError(f"engine ttl must be > 0 s, got {ttl_s}")
        self.ttl_s = ttl_s
        self._engines: dict[str, EngineState] = {}

    def observe(self, state: EngineState) -> bool:
        """Record a heartbeat; True when the engine is new (joined)."""
        joined = state.engine_id not in self._engines
        self._engines[state.engine_id] = state
        return joined

    def remove(self, engine_id: str) -> bool:
        return self._engines.pop(engine_id, None) is not None

    def expire(self, now_s: float) -> list[str]:
        """Drop engines silent for longer than the ttl; returns the ids that left."""
        gone = [e for e, s in self._engines.items() if now_s - s.last_seen_s > self.ttl_s]
        for engine_id in gone:
            del self._engines[engine_id]
        return gone

    def loads(self, now_s: float) -> dict[str, float]:
        """The engines a new call may go to: heard from within the ttl and not draining."""
        return {e: s.load for e, s in self._engines.items()
                if now_s - s.last_seen_s <= self.ttl_s and not s.draining}

    def add_load(self, engine_id: str, tokens: float) -> None:
        """Count a call routed since the last heartbeat, so a burst does not all go to one engine."""
        state = self._engines.get(engine_id)
        if state is not None:
            state.load += tokens

    def states(self) -> list[EngineState]:
        return sorted(self._engines.values(), key=lambda s: s.engine_id)
