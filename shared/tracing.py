"""OpenTelemetry tracing: spans per call across the API, router and engines, exported over OTLP.

Off unless OpenTelemetry's own variables ask for it (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with `OTEL_SDK_DISABLED` not true), so an unconfigured mesh
pays one boolean test per message. When on, the trace context rides in NATS message headers
(W3C `traceparent`): `Bus.publish`/`request` inject the current span's context and `Bus`'s
dispatcher opens a consumer span under it, so every service a call crosses joins the client's
trace. Spans are exported by a background thread in batches with a bounded queue: a collector that
is down or slow drops spans, never holds up a call.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACEPARENT = "traceparent"  # the W3C header a traced message or HTTP request carries
EXPORT_TIMEOUT_S = 2.0  # one export attempt; the exporter retries in its own thread

_enabled = False
_tracer: trace.Tracer = trace.NoOpTracer()


def tracing_requested(environ: Mapping[str, str] = os.environ) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in _ENDPOINT_VARS)


def configure_tracing(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install an OTLP/HTTP exporter for this process when the environment asks; True if on.
    The exporter reads the endpoint, headers and protocol options from the standard variables."""
    global _enabled, _tracer
    if _enabled or not tracing_requested(environ):
        return _enabled
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = environ.get("OTEL_SERVICE_NAME") or f"autellix-{service.replace('_', '-')}"
    # the provider flushes its queue at interpreter exit (shutdown_on_exit)
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S)))
    trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer("autellix")
    _enabled = True
    return True


def enabled() -> bool:
    return _enabled


def outgoing_headers() -> dict[str, str] | None:
    """NATS headers carrying the current trace context; None when off or outside any span."""
    if not _enabled:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


@contextmanager
def span_from(name: str, headers: Mapping[str, str] | None, kind: trace.SpanKind,
              attributes: Mapping[str, str] | None = None) -> Iterator[trace.Span | None]:
    """A span whose parent is the context in `headers` (a message's or an HTTP request's); the
    span is current inside the block, so what the block publishes carries it on."""
    if not _enabled:
        yield None
        return
    parent = propagate.extract(headers or {})
    token = otel_context.attach(parent)
    try:
        with _tracer.start_as_current_span(name, kind=kind, attributes=dict(attributes or {})) as span:
            yield span
    finally:
        otel_context.detach(token)


@contextmanager
def child_span(name: str, attributes: Mapping[str, str] | None = None) -> Iterator[trace.Span | None]:
    """A span under the current one (e.g. a task started by a traced handler)."""
    if not _enabled:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=dict(attributes or {})) as span:
        yield span


def current_trace_id() -> str:
    """The current span's trace id in hex ('' when off or outside a span): for log lines."""
    if not _enabled:
        return ""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
