"""The engines' regime during a live run, from their heartbeats: running and waiting calls, KV use;
and the controller's anti-starvation promotions (its audit events), beside the simulator's count.

A ratio between policies means little without the regime beside it: below
saturation nothing queues and every policy ties.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.bus import Bus
from shared.bus.incoming import Incoming
from shared.protocol import messages as m
from shared.protocol import subjects


@dataclass
class RegimeSampler:
    samples: int = 0
    running_sum: float = 0.0
    waiting_sum: float = 0.0
    kv_sum: float = 0.0
    max_waiting: int = 0
    max_kv_use: float = 0.0
    promotions: int = 0
    engines: set[str] = field(default_factory=set)
    _bus: Bus | None = None

    async def start(self, nats_url: str) -> None:
        self._bus = await Bus.connect(nats_url, "loadgen", connect_timeout_s=5.0)
        await self._bus.subscribe(subjects.all_engine_heartbeats(), self._on_heartbeat, types=(m.EngineHeartbeat,))
        await self._bus.subscribe(subjects.events_of_type(m.ProgramPromoted), self._on_promotion,
                                  types=(m.ProgramPromoted,))

    async def _on_promotion(self, msg: Incoming) -> None:
        self.promotions += 1

    async def _on_heartbeat(self, msg: Incoming) -> None:
        hb: m.EngineHeartbeat = msg.body
        self.samples += 1
        self.engines.add(hb.engine_id)
        self.running_sum += hb.running_calls
        self.waiting_sum += hb.queue_depth
        self.kv_sum += hb.kv_use
        self.max_waiting = max(self.max_waiting, hb.queue_depth)
        self.max_kv_use = max(self.max_kv_use, hb.kv_use)

    async def stop(self) -> dict:
        if self._bus is not None:
            await self._bus.close()
        n = max(self.samples, 1)
        return {
            "heartbeats": self.samples,
            "engines": sorted(self.engines),
            "mean_running_calls": self.running_sum / n,  # per engine, sampled at heartbeats
            "mean_waiting_calls": self.waiting_sum / n,
            "max_waiting_calls": self.max_waiting,
            "mean_kv_use": self.kv_sum / n,
            "max_kv_use": self.max_kv_use,
            "promotions": self.promotions,
        }
