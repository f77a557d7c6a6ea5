"""The API's access-log middleware alone, in a loop: CPU per request by configuration.

    python -m loadgen.bench.access_log_cost [--requests 20000] [--repeats 3] [--json PATH]

What `tracing_cost` measures on a whole stack, taken apart: the middleware (`AccessLog`) around an
app that answers at once, driven `--requests` times in one process per variant (tracing and
logging are configured once per process), the main thread's CPU only (the span export thread's
work is the stack bench's to count). Variants, each in a fresh process, interleaved over the
repeats:
- off: no access log, no tracing (the middleware passes the request through);
- access_log: the access log's line (`HotLine`), written to a file as a service writes its log;
- traced_0pct / traced_10pct / traced_all: the line and a server span, sampling 0, 10 and 100%
  (the exporter points at a port nothing listens on: its thread fails apart from this one).
Beside them, the line's writer alone: `HotLine` against structlog's own chain for the same line
(`line_hot`, `line_structlog`), and the OTLP protobuf encoding of a finished server span
(`encode_span`), each in microseconds per line or span.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen.bench.spread import summary
from loadgen.live.real_servers import report

MIDDLEWARE = ("off", "access_log", "traced_0pct", "traced_10pct", "traced_all")
PARTS = ("line_hot", "line_structlog", "encode_span")
_SAMPLED = {"traced_0pct": "0", "traced_10pct": "0.1", "traced_all": "1"}
_FIELDS = dict(method="POST", path="/v1/chat/completions", status=200, duration_ms=1.234, client="127.0.0.1",
               tenant="t", model="m", program_id="p" * 16, call_id="c" * 16, engine_id="e0", trace_id="")


def _setup(variant: str) -> None:
    if variant in _SAMPLED:
        os.environ.update({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                           "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                           "OTEL_TRACES_SAMPLER_ARG": _SAMPLED[variant]})
    from shared import tracing
    from shared.logging import configure_logging
    configure_logging("session_api", level="info", json=True)
    tracing.configure_tracing("session_api")


async def _middleware_us(variant: str, n: int) -> float:
    from services.session_api.access_log import AccessLog

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message) -> None:
        pass

    mw = AccessLog(app, enabled=variant != "off")
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"x"), (b"content-type", b"application/json"), (b"authorization", b"Bearer x")]}
    for _ in range(n // 10):  # warm
        await mw(scope, receive, send)
    t0 = time.thread_time()
    for _ in range(n):
        await mw(scope, receive, send)
    return (time.thread_time() - t0) / n * 1e6


def _part_us(part: str, n: int) -> float:
    if part == "encode_span":
        return _encode_us(n)
    from shared.logging import HotLine, get_logger
    log = get_logger()

    def by_structlog(**fields) -> None:
        log.info("http_request", **fields)

    write = HotLine("http_request") if part == "line_hot" else by_structlog
    t0 = time.thread_time()
    for _ in range(n):
        write(**_FIELDS)
    return (time.thread_time() - t0) / n * 1e6


def _encode_us(n: int) -> float:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind

    class Keep(SpanExporter):
        def __init__(self) -> None:
            self.spans: list = []

        def export(self, spans) -> SpanExportResult:
            self.spans.extend(spans)
            return SpanExportResult.SUCCESS

    keep = Keep()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("autellix")
    batch = 512  # the batch span processor's default export batch
    for _ in range(batch):
        with tracer.start_as_current_span("POST /v1/chat/completions", kind=SpanKind.SERVER,
                                          attributes={"http.request.method": "POST", "url.path": "/v1/chat/completions"}) as s:
            s.set_attributes({"http.response.status_code": 200, "autellix.program_id": "p" * 16,
                              "autellix.call_id": "c" * 16, "autellix.engine_id": "e0"})
    rounds = max(1, n // batch)
    t0 = time.thread_time()
    for _ in range(rounds):
        encode_spans(keep.spans).SerializePartialToString()
    return (time.thread_time() - t0) / (rounds * batch) * 1e6


def _one(variant: str, n: int) -> float:
    """In this process (a fresh one per variant): the variant's CPU in microseconds per unit."""
    _setup(variant)
    if variant in MIDDLEWARE:
        return asyncio.run(_middleware_us(variant, n))
    return _part_us(variant, n)


def run(requests: int, repeats: int) -> dict:
    names = MIDDLEWARE + PARTS
    runs: dict[str, list[float]] = {v: [] for v in names}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for variant in names[i % len(names):] + names[:i % len(names)]:
                with open(Path(tmp) / f"{variant}.log", "wb") as log:  # lines go to a file, as a service's do
                    done = subprocess.run([sys.executable, "-m", "loadgen.bench.access_log_cost", "--one", variant,
                                           "--requests", str(requests)], stdout=subprocess.PIPE, stderr=log,
                                          text=True, check=True, timeout=600)
                runs[variant].append(json.loads(done.stdout)["us"])
    off = runs["off"]
    return {"requests": requests, "repeats": repeats, "unit": "CPU us of the main thread per request (middleware) "
            "or per line / span (parts)",
            "middleware_us": {v: summary(runs[v], 2) for v in MIDDLEWARE},
            "middleware_added_over_off_us": {v: summary([a - b for a, b in zip(runs[v], off, strict=True)], 2)
                                             for v in MIDDLEWARE if v != "off"},
            "parts_us": {v: summary(runs[v], 2) for v in PARTS}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.access_log_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=20000, help="requests (or lines, spans) per measurement")
    p.add_argument("--repeats", type=int, default=3, help="processes per variant, interleaved")
    p.add_argument("--one", choices=MIDDLEWARE + PARTS, help=argparse.SUPPRESS)  # a child's single measurement
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.requests < 1 or args.repeats < 1:
        p.error("--requests and --repeats must be at least 1")
    if args.one:
        print(json.dumps({"us": _one(args.one, args.requests)}))
        return 0
    inherited = sorted(k for k in os.environ if k.startswith("OTEL_"))
    if inherited:
        p.error(f"unset {', '.join(inherited)} first: each variant sets its own tracing variables")
    return report(run(args.requests, args.repeats), args.json, "python -m loadgen.bench.access_log_cost", argv)


if __name__ == "__main__":
    raise SystemExit(main())
