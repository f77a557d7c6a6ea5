"""Trace ids for the tracer provider, where the next root span's id may be drawn ahead: under a
ratio sampler `shared.tracing.span_from` decides on the id before it makes a span, and only a kept
trace's span (with that id) is made. Imported only when tracing is on (it loads the SDK)."""

from __future__ import annotations

import threading

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator


class DrawnAheadIds(RandomIdGenerator):
    """Random ids; `use_next(id)` makes `id` the next root span's on this thread (per thread: a
    span made on another thread never takes it)."""

    def __init__(self) -> None:
        self._ahead = threading.local()

    def draw_trace_id(self) -> int:
        return super().generate_trace_id()

    def use_next(self, trace_id: int) -> None:
        self._ahead.trace_id = trace_id

    def generate_trace_id(self) -> int:
        trace_id = getattr(self._ahead, "trace_id", 0)
        if trace_id:
            self._ahead.trace_id = 0
            return trace_id
        return super().generate_trace_id()
