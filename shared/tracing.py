"""OpenTelemetry tracing: spans per call across the API, router and engines, exported over OTLP.

Off unless OpenTelemetry's own variables ask for it (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with `OTEL_SDK_DISABLED` not true), so an unconfigured mesh
pays one boolean test per message. When on, the trace context rides in NATS message headers
(W3C `traceparent`): `Bus.publish`/`request` inject the current span's context and `Bus`'s
dispatcher opens a consumer span under it, so every service a call crosses joins the client's
trace. Spans are exported by a background thread in batches with a bounded queue: a collector that
is down or slow drops spans, never holds up a call.

Only a sampled trace costs more than that test (measured, docs/results/tracing_cost.json): the
sampler (`OTEL_TRACES_SAMPLER`, parent-based by default) decides once, at the call's first span; an
unsampled span is never made current, so nothing downstream is injected, sent in a header, parsed
or spanned. Under a ratio sampler the first span's decision is made before the span is: its trace
id is drawn ahead and compared with the sampler's bound, and only a kept trace gets an SDK span
(with that id, so the SDK's sampler reaches the same decision); a dropped one costs no span at all. The context crosses in W3C trace-context form only (`traceparent`, `tracestate`),
written by that propagator directly rather than through the global composite one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACEPARENT = "traceparent"  # the W3C header a traced message or HTTP request carries
EXPORT_TIMEOUT_S = 2.0  # one export attempt; the exporter retries in its own thread

# OTEL_TRACES_SAMPLER values whose root decision is a trace-id ratio -> parent-based or not
_RATIO_SAMPLERS = {"traceidratio": False, "parentbased_traceidratio": True}

_enabled = False
_tracer: trace.Tracer = trace.NoOpTracer()
_w3c = TraceContextTextMapPropagator()
_root_bound: int | None = None  # a ratio sampler's: keep a new trace when its id's low 64 bits are below
_ids = None  # the provider's DrawnAheadIds (shared/trace_ids.py) once on
_LOW_64_BITS = (1 << 64) - 1  # what a ratio sampler compares with its bound


def ratio_sampling(environ: Mapping[str, str] = os.environ) -> tuple[float, bool] | None:
    """(rate, parent-based) of the trace-id ratio sampler `OTEL_TRACES_SAMPLER` names; None for the
    other samplers (the SDK reads those itself). Raises ValueError, naming the variable, for a rate
    that is not a number from 0 to 1 (the SDK would warn and sample everything)."""
    name = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if name not in _RATIO_SAMPLERS:
        return None
    raw = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    try:
        rate = float(raw) if raw else 1.0  # the specification's default when the variable is unset
    except ValueError:
        rate = float("nan")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"OTEL_TRACES_SAMPLER_ARG must be a sampling rate from 0 to 1 for "
                         f"OTEL_TRACES_SAMPLER={name}, got {raw!r}")
    return rate, _RATIO_SAMPLERS[name]


def check_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Raises ValueError for a tracing variable this process would misread (checked at start-up)."""
    if tracing_requested(environ):
        ratio_sampling(environ)


def tracing_requested(environ: Mapping[str, str] = os.environ) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in _ENDPOINT_VARS)


def configure_tracing(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install an OTLP/HTTP exporter for this process when the environment asks; True if on.
    The exporter reads the endpoint, headers and protocol options from the standard variables."""
    global _enabled, _tracer, _root_bound, _ids
    if _enabled or not tracing_requested(environ):
        return _enabled
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # the provider flushes its queue at interpreter exit (shutdown_on_exit)
    provider, _root_bound = build_provider(service, environ)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S)))
    trace.set_tracer_provider(provider)
    _tracer, _ids = provider.get_tracer("autellix"), provider.id_generator
    _enabled = True
    return True


def build_provider(service: str, environ: Mapping[str, str] = os.environ):
    """(a TracerProvider with no span processor yet, the bound of its ratio sampler's root
    decision or None). A ratio sampler is built here from the variables, any other by the SDK."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from shared.trace_ids import DrawnAheadIds

    ratio = ratio_sampling(environ)
    sampler = root = None
    if ratio is not None:
        rate, parent_based = ratio
        sampler = root = TraceIdRatioBased(rate)
        if parent_based:
            sampler = ParentBased(root)
    name = environ.get("OTEL_SERVICE_NAME") or f"autellix-{service.replace('_', '-')}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}), sampler=sampler,
                              id_generator=DrawnAheadIds())
    return provider, (root.bound if root is not None else None)


def enabled() -> bool:
    return _enabled


def outgoing_headers() -> dict[str, str] | None:
    """NATS (or HTTP) headers carrying the current trace context; None when off, outside any
    span, or when the current trace is not sampled (its hops would make no spans anyway)."""
    if not _enabled:
        return None
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    carrier: dict[str, str] = {}
    _w3c.inject(carrier)
    return carrier


@contextmanager
def span_from(name: str, headers: Mapping[str, str] | None, kind: trace.SpanKind,
              attributes: Mapping[str, str] | None = None) -> Iterator[trace.Span | None]:
    """A span whose parent is the context in `headers` (a message's or an HTTP request's), or a
    new trace's root when they carry none; current inside the block, so what the block publishes
    carries it on. Yields None when tracing is off or the sampler leaves this trace out: such a
    span is not made current (nothing downstream is traced) and the caller sets no attributes."""
    if not _enabled:
        yield None
        return
    if _root_bound is not None and not (headers and TRACEPARENT in headers):  # a new trace
        trace_id = _ids.draw_trace_id()
        if trace_id & _LOW_64_BITS >= _root_bound:  # what the sampler would decide
            yield None
            return
        _ids.use_next(trace_id)
    parent = _w3c.extract(headers or {})  # a fresh context (a new trace) when they carry none
    span = _tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
    if not span.is_recording():
        yield None
        return
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    try:
        with span:  # ends it; records an exception that leaves the block, with an error status
            yield span
    finally:
        otel_context.detach(token)


@contextmanager
def child_span(name: str, attributes: Mapping[str, str] | None = None) -> Iterator[trace.Span | None]:
    """A span under the current one (e.g. a task started by a traced handler); None (and no span)
    when the current trace is not sampled or there is none."""
    if not _enabled or not trace.get_current_span().is_recording():
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as span:
        yield span


def trace_id_of(span: trace.Span | None) -> str:
    """A recorded span's trace id in hex ('' for None): the trace a log line can be looked up in."""
    return format(span.get_span_context().trace_id, "032x") if span is not None else ""


def current_trace_id() -> str:
    """The current recorded span's trace id in hex ('' when off, outside a span or unsampled)."""
    if not _enabled:
        return ""
    span = trace.get_current_span()
    return trace_id_of(span) if span.is_recording() else ""
