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


# --- a ratio sampler decides a new trace before any span is made (shared/trace_ids.py) -------------
RATIO_ENV = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}


def _installed(monkeypatch, environ) -> tuple[InMemorySpanExporter, TracerProvider]:
    """The provider `configure_tracing` would build from `environ`, exporting in memory."""
    provider, bound = tracing.build_provider("session_api", environ)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for name, value in (("_tracer", provider.get_tracer("test")), ("_enabled", True), ("_root_bound", bound),
                        ("_ids", provider.id_generator)):
        monkeypatch.setattr(tracing, name, value)
    return exporter, provider


def test_a_dropped_new_trace_makes_no_sdk_span_and_a_kept_one_the_samplers_decision(monkeypatch):
    exporter, provider = _installed(monkeypatch, RATIO_ENV)
    made = []
    monkeypatch.setattr(provider.id_generator, "generate_span_id",
                        lambda real=provider.id_generator.generate_span_id: made.append(1) or real())
    n, kept = 2000, 0
    for _ in range(n):
        with tracing.span_from("POST /v1/chat/completions", {}, SpanKind.SERVER) as span:
            kept += span is not None
            assert (span is None) == (tracing.outgoing_headers() is None)
    spans = exporter.get_finished_spans()
    assert len(spans) == kept == len(made)  # every SDK span made was a kept trace's
    assert 400 <= kept <= 600  # 25% of 2,000 is 500, sd 19: a test of the rate, not of luck
    for s in spans:
        assert provider.sampler.should_sample(None, s.context.trace_id, "again").decision.is_sampled()


def test_a_clients_traceparent_is_followed_under_a_ratio_sampler(monkeypatch):
    exporter, _ = _installed(monkeypatch, {**RATIO_ENV, "OTEL_TRACES_SAMPLER_ARG": "0"})
    with tracing.span_from("POST /v1/chat/completions", {"traceparent": SAMPLED_CLIENT}, SpanKind.SERVER) as span:
        assert span is not None  # the client sampled it: parent-based follows, whatever the ratio
    with tracing.span_from("POST /v1/chat/completions", {}, SpanKind.SERVER) as span:
        assert span is None
    (only,) = exporter.get_finished_spans()
    assert only.context.trace_id == 0x4bf92f3577b34da6a3ce929d0e0e4736


@given(rate=st.floats(0.0, 1.0), trace_id=st.integers(1, 2**128 - 1))
def test_the_early_decision_is_the_sdk_samplers(rate, trace_id):
    for name in ("traceidratio", "parentbased_traceidratio"):
        provider, bound = tracing.build_provider("router", {"OTEL_TRACES_SAMPLER": name,
                                                            "OTEL_TRACES_SAMPLER_ARG": repr(rate)})
        sdk = provider.sampler.should_sample(None, trace_id, "root").decision.is_sampled()
        assert (trace_id & tracing._LOW_64_BITS < bound) == sdk


def test_an_id_drawn_ahead_is_taken_once_and_only_on_its_thread():
    import threading

    from shared.trace_ids import DrawnAheadIds
    ids = DrawnAheadIds()
    ids.use_next(42)
    elsewhere = []
    t = threading.Thread(target=lambda: elsewhere.append(ids.generate_trace_id()))
    t.start()
    t.join()
    assert elsewhere[0] != 42
    assert ids.generate_trace_id() == 42 and ids.generate_trace_id() != 42


@pytest.mark.parametrize("arg", ["abc", "1.5", "-0.1", "nan", "inf"])
def test_a_malformed_sampling_rate_is_refused_with_the_variables_name(arg):
    with pytest.raises(ValueError, match="OTEL_TRACES_SAMPLER_ARG must be a sampling rate from 0 to 1"):
        tracing.ratio_sampling({"OTEL_TRACES_SAMPLER": "TraceIdRatio", "OTEL_TRACES_SAMPLER_ARG": arg})


def test_sampling_variables_read_as_the_specification_says():
    assert tracing.ratio_sampling({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio"}) == (1.0, True)
    assert tracing.ratio_sampling({"OTEL_TRACES_SAMPLER": " TRACEIDRATIO ", "OTEL_TRACES_SAMPLER_ARG": "0.1"}) == (0.1, False)
    assert tracing.ratio_sampling({"OTEL_TRACES_SAMPLER": "always_on", "OTEL_TRACES_SAMPLER_ARG": "abc"}) is None
    assert tracing.ratio_sampling({}) is None


def test_a_service_refuses_to_start_on_a_malformed_sampling_rate(monkeypatch):
    from shared.service_process import run_service
    from shared.settings import MeshSettings
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "ten percent")
    served = []
    with pytest.raises(SystemExit, match="router: error: OTEL_TRACES_SAMPLER_ARG .* got 'ten percent'"):
        run_service("router", MeshSettings(), served.append)
    assert served == []
