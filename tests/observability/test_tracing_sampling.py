"""What a call pays for tracing follows the sampler (shared/tracing.py): an unsampled trace makes no
current span, no header and no span downstream; a sampled one carries W3C `traceparent` that the
next hop's span hangs under. Run on the OpenTelemetry SDK itself with an in-memory exporter in
place of OTLP (the provider is this test's, so the process-wide one stays untouched)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, StatusCode

from shared import tracing

SAMPLED_CLIENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
UNSAMPLED_CLIENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


def _traced(monkeypatch, sampler) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("test"))
    monkeypatch.setattr(tracing, "_enabled", True)
    return exporter


def test_an_unsampled_call_makes_no_span_and_sends_no_header(monkeypatch):
    exporter = _traced(monkeypatch, ParentBased(TraceIdRatioBased(0.0)))
    for _ in range(20):
        with tracing.span_from("POST /v1/chat/completions", {}, SpanKind.SERVER, {"url.path": "/"}) as span:
            assert span is None
            assert tracing.outgoing_headers() is None  # nothing for the next hop to parse
            assert tracing.current_trace_id() == ""
            with tracing.child_span("engine_agent generate") as child:
                assert child is None
    assert exporter.get_finished_spans() == ()


def test_a_clients_unsampled_traceparent_is_followed(monkeypatch):
    exporter = _traced(monkeypatch, ParentBased(ALWAYS_ON))
    with tracing.span_from("POST /v1/chat/completions", {"traceparent": UNSAMPLED_CLIENT}, SpanKind.SERVER) as span:
        assert span is None and tracing.outgoing_headers() is None
    assert exporter.get_finished_spans() == ()


def test_a_sampled_call_carries_its_context_to_the_next_hop(monkeypatch):
    exporter = _traced(monkeypatch, ParentBased(ALWAYS_ON))
    with tracing.span_from("POST /v1/chat/completions", {"traceparent": SAMPLED_CLIENT}, SpanKind.SERVER) as server:
        headers = tracing.outgoing_headers()
        ctx = server.get_span_context()
        assert headers == {"traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"}
        assert tracing.current_trace_id() == tracing.trace_id_of(server) == "4bf92f3577b34da6a3ce929d0e0e4736"
    with tracing.span_from("router RouteCall", headers, SpanKind.CONSUMER, {"messaging.destination.name": "r"}):
        with tracing.child_span("router choose"):
            pass
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    root, consumer, child = by_name["POST /v1/chat/completions"], by_name["router RouteCall"], by_name["router choose"]
    assert root.parent.span_id == 0x00f067aa0ba902b7  # the client's span
    assert consumer.parent.span_id == root.context.span_id and child.parent.span_id == consumer.context.span_id
    assert {s.context.trace_id for s in (root, consumer, child)} == {0x4bf92f3577b34da6a3ce929d0e0e4736}
    assert consumer.kind == SpanKind.CONSUMER and consumer.attributes["messaging.destination.name"] == "r"


def test_an_exception_leaving_the_span_is_recorded_and_ends_it(monkeypatch):
    exporter = _traced(monkeypatch, ParentBased(ALWAYS_ON))
    with pytest.raises(ValueError), tracing.span_from("engine_agent RunCall", {}, SpanKind.CONSUMER):
        raise ValueError("bad call")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR and span.events[0].name == "exception"
    assert tracing.outgoing_headers() is None  # the span is no longer current


def test_tracing_off_costs_no_span(monkeypatch):
    monkeypatch.setattr(tracing, "_enabled", False)
    with tracing.span_from("POST /x", {"traceparent": SAMPLED_CLIENT}, SpanKind.SERVER) as span:
        assert span is None and tracing.outgoing_headers() is None and tracing.current_trace_id() == ""


@given(trace_id=st.integers(1, 2**128 - 1), span_id=st.integers(1, 2**64 - 1))
def test_any_sampled_parent_is_the_next_hops_parent(trace_id, span_id):
    # set by hand (not monkeypatch: Hypothesis runs this many times in one test)
    saved = tracing._tracer, tracing._enabled
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(ALWAYS_ON))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing._tracer, tracing._enabled = provider.get_tracer("test"), True
    try:
        with tracing.span_from("hop", {"traceparent": f"00-{trace_id:032x}-{span_id:016x}-01"}, SpanKind.CONSUMER):
            headers = tracing.outgoing_headers()
        with tracing.span_from("next", headers, SpanKind.CONSUMER):
            pass
        hop, nxt = exporter.get_finished_spans()
        assert hop.parent.span_id == span_id and hop.context.trace_id == nxt.context.trace_id == trace_id
        assert nxt.parent.span_id == hop.context.span_id
    finally:
        tracing._tracer, tracing._enabled = saved
