"""Per-call state the agent keeps while an engine holds a call: where its tokens go, how many were
sent, and the routing metadata the completion event needs."""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

from shared.core.starvation import CallQueueing
from shared.engine.api import EngineCall
from shared.protocol import messages as m
from shared.protocol.ids import DEFAULT_TENANT_ID

TOKEN_ID_SPACE = 32_000  # fabricated token ids are drawn from a Llama-sized vocabulary


@dataclass
class LiveCall:
    route: m.RouteCall
    submitted_s: float  # engine clock
    rng: random.Random = field(repr=False, default_factory=random.Random)
    next_chunk_index: int = 0
    tokens_sent: int = 0
    tokens_pending: int = 0  # produced, held back to coalesce chunks
    last_chunk_s: float = 0.0  # engine clock of the last chunk sent
    started: bool = False
    requeued: bool = False  # preempted and waiting again (until its next token)
    # the program view it was submitted against lacked completions the client had seen: its ATLAS
    # thread base is stale, so the completion records none and the process table takes its own
    view_behind: bool = False
    queueing: CallQueueing | None = None  # its wait and service for the queue snapshot

    def __post_init__(self) -> None:
        if self.queueing is None:
            self.queueing = CallQueueing(waiting_since_s=self.submitted_s)

    @property
    def call_id(self) -> str:
        return self.route.call_id

    def fabricate(self, num_tokens: int) -> list[int]:
        return [self.rng.randrange(TOKEN_ID_SPACE) for _ in range(num_tokens)]

    def take_index(self) -> int:
        index = self.next_chunk_index
        self.next_chunk_index += 1
        return index


def engine_call(route: m.RouteCall, now_s: float, seq: int) -> EngineCall:
    """A routed call as the engine sees it, on the engine clock."""
    segments = tuple((s, n) for s, n in route.prompt_segments)
    if sum(n for _, n in segments) != route.prompt_tokens:
        # no (or inconsistent) segments: the whole prompt is one segment unique to this call
        segments = ((f"prompt:{route.call_id}", route.prompt_tokens),)
    if route.program_started_at_ns:
        program_age_s = max(time.time_ns() - route.program_started_at_ns, 0) / 1e9
        program_arrival_s = now_s - program_age_s
    else:
        program_arrival_s = now_s
    return EngineCall(call_id=route.call_id, program_id=route.program_id, thread_id=route.thread_id,
                      prompt_segments=segments, max_output_tokens=route.max_tokens, arrival_s=now_s,
                      program_arrival_s=program_arrival_s, seq=seq,
                      expected_remaining_s=checked_estimate(route.expected_remaining_s),
                      tenant=route.tenant or DEFAULT_TENANT_ID)


def checked_estimate(value: float | None) -> float | None:
    """A SERPT estimate the engine may order by: finite and >= 0, else none (the fallback order)."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value
