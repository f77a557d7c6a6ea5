"""An OTLP/HTTP trace receiver that keeps what it is sent: the collector of the tracing tests and
of the tracing-cost run (`python -m loadgen.bench.otlp_sink --port 4318 [--count-only]` until
Ctrl-C; `--count-only` counts the spans and keeps none, as a benchmark's collector needs)."""

from __future__ import annotations

import argparse
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

Span = tuple[str, str, str, str, str]  # service, name, trace id, span id, parent span id (hex)


class OtlpSink:
    def __init__(self, port: int = 0, count_only: bool = False) -> None:
        self.spans: list[Span] = []
        self.count = 0  # spans received
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                req = ExportTraceServiceRequest()
                req.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if count_only:
                    n = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
                    with sink.lock:
                        sink.count += n
                    self._answer()
                    return
                got = []
                for rs in req.resource_spans:
                    service = next((a.value.string_value for a in rs.resource.attributes
                                    if a.key == "service.name"), "")
                    for ss in rs.scope_spans:
                        got += [(service, s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex())
                                for s in ss.spans]
                with sink.lock:
                    sink.spans.extend(got)
                    sink.count += len(got)
                self._answer()

            def _answer(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of_trace(self, trace_id: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s[2] == trace_id]

    def stop(self) -> None:
        self.server.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.bench.otlp_sink")
    ap.add_argument("--port", type=int, default=4318)
    ap.add_argument("--count-only", action="store_true", help="count spans, keep none")
    args = ap.parse_args()
    sink = OtlpSink(args.port, args.count_only)
    print(f"otlp sink on http://127.0.0.1:{sink.port}", flush=True)
    try:
        while True:
            time.sleep(5)
            print(f"spans received: {sink.count}", flush=True)
    except KeyboardInterrupt:
        sink.stop()
        print(f"spans received: {sink.count}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
