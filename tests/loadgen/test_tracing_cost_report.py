"""The tracing-cost bench's report (loadgen/bench/tracing_cost.py): each variant's calls/s over the
`off` window of the same round, and its spread."""

from loadgen.bench.tracing_cost import _report, variants


def _w(rate: float) -> dict:
    return {"calls_per_s": rate, "cpu_ms_per_call": {"session_api": 1000 / rate, "total": 2000 / rate},
            "load_average_1m": 2.0}


def test_ratios_pair_windows_of_the_same_round():
    windows = {"off": [_w(100), _w(200), _w(100)], "traced_all": [_w(90), _w(150), _w(80)]}
    out = _report(windows, 3, 5.0, 64, 1.0, 2.0, 123)
    traced = out["variants"]["traced_all"]
    assert traced["of_off"]["runs"] == [0.9, 0.75, 0.8] and traced["of_off"]["median"] == 0.8
    assert out["variants"]["off"]["of_off"]["runs"] == [1.0, 1.0, 1.0]
    assert traced["calls_per_s"]["median"] == 90 and traced["cpu_ms_per_call"]["total"]["max"] == 25.0
    assert out["variants_first_round"] == ["off", "traced_all"] and out["spans_received_by_sink"] == 123


def test_only_traced_variants_name_a_collector_and_off_turns_the_access_log_off():
    v = variants("http://127.0.0.1:1")
    assert [k for k, env in v.items() if "OTEL_EXPORTER_OTLP_ENDPOINT" in env] == ["traced_all", "traced_10pct",
                                                                                   "traced_0pct"]
    assert v["off"] == v["off_again"] == {"ACCESS_LOG": "false"} and v["access_log"]["LOG_LEVEL"] == "info"
    assert v["traced_10pct"]["OTEL_TRACES_SAMPLER_ARG"] == "0.1"


def test_library_shares_count_a_stack_once_per_library_and_name_the_caller():
    from loadgen.bench.tracing_profile import library_shares

    site = "/venv/lib/python3.11/site-packages"
    raw = (f"process 1:\"python\";main (/repo/services/x/main.py:1);span_from (/repo/shared/tracing.py:92);"
           f"start_span ({site}/opentelemetry/sdk/trace/__init__.py:1171);"
           f"get ({site}/opentelemetry/context/__init__.py:5) 3\n"
           f"main (/repo/services/x/main.py:1);inc ({site}/prometheus_client/values.py:28) 1\n"
           "main (/repo/services/x/main.py:1) 6\n")
    out = library_shares(raw)
    assert out["busy_samples"] == 10
    assert out["share"] == {"opentelemetry": 0.3, "prometheus_client": 0.1, "structlog": 0.0}
    assert out["opentelemetry_under"][0]["share"] == 0.3
    assert out["opentelemetry_under"][0]["frame"].startswith("span_from (")


def test_the_sink_reports_what_it_counted_and_stops():
    """A real sink process: spans posted to it are counted in its output, which is read as it
    comes, and stop() returns the last count."""
    import time

    import httpx
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from loadgen.bench.tracing_cost import Sink

    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for i in range(3):
        spans.add(name=f"s{i}", trace_id=bytes(16), span_id=bytes([i + 1]) * 8)
    sink = Sink()
    try:
        httpx.post(f"{sink.url}/v1/traces", content=req.SerializeToString(),
                   headers={"Content-Type": "application/x-protobuf"}).raise_for_status()
        time.sleep(5.5)  # the sink prints its count every 5 s
    finally:
        count = sink.stop()
    assert count == 3
    assert sink.proc.returncode is not None


def test_the_access_log_loop_bench_runs_at_a_tiny_size(tmp_path):
    """`python -m loadgen.bench.access_log_cost` end to end, each variant in its own process; no
    timing asserted, only that every variant and part reports a CPU figure."""
    import json

    from loadgen.bench.access_log_cost import MIDDLEWARE, PARTS, main

    out = tmp_path / "cost.json"
    assert main(["--requests", "20", "--repeats", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["middleware_us"]) == set(MIDDLEWARE) and set(result["parts_us"]) == set(PARTS)
    assert all(v["median"] > 0 for v in (*result["middleware_us"].values(), *result["parts_us"].values()))
    assert result["command"].startswith("python -m loadgen.bench.access_log_cost")
