"""Tracing and access logs against a real `autellix up`: a client's `traceparent` joins every span
the call makes (API, router, engine) at an OTLP/HTTP collector run by the test, each request leaves
one JSON access-log line with its program, call and engine ids, third-party loggers write the same
JSON, and a collector that is down never fails a call."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import openai
import pytest

from loadgen.bench.otlp_sink import OtlpSink
from runtime.ports import free_port
from tests.observability.up_process import start_up, stop_up

CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_TRACEPARENT = f"00-{CLIENT_TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def traced_stack():
    collector = OtlpSink()
    state_dir = Path(tempfile.mkdtemp(prefix="autellix-test-trace-", dir="/tmp"))
    port = free_port()
    proc, _, key = start_up(state_dir, port, extra_env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}", "OTEL_BSP_SCHEDULE_DELAY": "100",
        "LOG_FORMAT": "json"})
    try:
        yield collector, state_dir, f"http://127.0.0.1:{port}/v1", key
    finally:
        stop_up(proc)
        collector.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def _wait_for(predicate, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def test_a_clients_traceparent_joins_every_span_of_the_call(traced_stack):
    collector, _, base_url, key = traced_stack
    client = openai.OpenAI(base_url=base_url, api_key=key)
    answer = client.chat.completions.create(model="autellix-lite", max_tokens=8,
                                            messages=[{"role": "user", "content": "trace me"}],
                                            extra_headers={"traceparent": CLIENT_TRACEPARENT})
    assert answer.choices[0].message.content

    def services_seen():
        spans = collector.of_trace(CLIENT_TRACE_ID)
        names = {s[0] for s in spans}
        return spans if {"autellix-session-api", "autellix-router", "autellix-engine-agent"} <= names else None
    spans = _wait_for(services_seen)
    assert spans, f"spans of the client's trace: {collector.of_trace(CLIENT_TRACE_ID)}"
    by_id = {s[3]: s for s in spans}
    server = [s for s in spans if s[0] == "autellix-session-api" and s[1] == "POST /v1/chat/completions"]
    assert len(server) == 1 and server[0][4] == "00f067aa0ba902b7"  # the client's span is its parent
    for service in ("autellix-router", "autellix-engine-agent"):
        span = next(s for s in spans if s[0] == service)
        chain, cur = [], span
        while cur is not None:  # walk up: every span hangs off the API's server span
            chain.append(cur)
            cur = by_id.get(cur[4])
        assert chain[-1] == server[0], f"{service} span not under the API's: {chain}"


def test_each_request_leaves_one_json_access_line_with_its_ids(traced_stack):
    _, state_dir, base_url, key = traced_stack
    client = openai.OpenAI(base_url=base_url, api_key=key)
    session = "access-log-session"
    client.chat.completions.create(model="autellix-lite", max_tokens=4, messages=[{"role": "user", "content": "hi"}],
                                   extra_headers={"X-Session-Id": session})
    log_path = state_dir / "logs" / "session_api.log"

    def line():
        for raw in log_path.read_text().splitlines():
            if raw.startswith("{"):
                record = json.loads(raw)
                if record.get("event") == "http_request" and record.get("path") == "/v1/chat/completions" \
                        and record.get("program_id", "").startswith("c-"):
                    return record
        return None
    record = _wait_for(line, 10.0)
    assert record is not None, log_path.read_text()[-2000:]
    assert record["status"] == 200 and record["tenant"] == "dev" and record["model"] == "autellix-lite"
    assert record["call_id"] and record["engine_id"] and record["duration_ms"] > 0
    assert record["service"] == "session_api"
    # every line of the log is JSON, the libraries' (uvicorn, nats-py) included
    lines = [raw for raw in log_path.read_text().splitlines() if raw.strip()]
    not_json = [raw for raw in lines if not raw.startswith("{")]
    assert not not_json, not_json[:5]


def test_a_collector_that_is_down_never_fails_a_call():
    state_dir = Path(tempfile.mkdtemp(prefix="autellix-test-trace-down-", dir="/tmp"))
    port = free_port()
    dead = free_port()  # nothing listens here
    proc, _, key = start_up(state_dir, port, extra_env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{dead}", "OTEL_BSP_SCHEDULE_DELAY": "100"})
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0, timeout=30)
        for i in range(20):
            answer = client.chat.completions.create(model="autellix-lite", max_tokens=4,
                                                    messages=[{"role": "user", "content": f"call {i}"}])
            assert answer.choices[0].finish_reason
    finally:
        stop_up(proc)
        shutil.rmtree(state_dir, ignore_errors=True)


def test_a_ratio_sampler_traces_some_calls_whole_and_the_others_not_at_all():
    """Half the calls sampled (`parentbased_traceidratio`, 0.5): each call's access-log line names
    its trace when sampled, and the collector holds exactly those traces, each with the API's,
    the router's and the engine's spans (the decision is made once, before the API's span)."""
    collector = OtlpSink()
    state_dir = Path(tempfile.mkdtemp(prefix="autellix-test-trace-ratio-", dir="/tmp"))
    port = free_port()
    proc, _, key = start_up(state_dir, port, extra_env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}", "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5", "LOG_FORMAT": "json"})
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0, timeout=30)
        n = 40
        for i in range(n):
            client.chat.completions.create(model="autellix-lite", max_tokens=4,
                                           messages=[{"role": "user", "content": f"ratio {i}"}])
        log_path = state_dir / "logs" / "session_api.log"

        def call_lines():
            lines = [json.loads(raw) for raw in log_path.read_text().splitlines() if raw.startswith("{")]
            calls = [r for r in lines if r.get("event") == "http_request" and r.get("path") == "/v1/chat/completions"]
            return calls if len(calls) == n else None
        lines = _wait_for(call_lines, 10.0)
        assert lines, log_path.read_text()[-2000:]
        sampled = {r["trace_id"] for r in lines if r["trace_id"]}
        assert 0 < len(sampled) < n  # at 0.5 over 40 calls, all or none has odds of 2^-39

        def chat_traces() -> dict[str, set[str]]:
            """trace id -> the services with spans in it, for traces rooted at a chat call (the
            probes `autellix up` sends are sampled too, and make traces of their own)"""
            with collector.lock:
                spans = list(collector.spans)
            chats = {t for service, name, t, _, _ in spans
                     if service == "autellix-session-api" and name == "POST /v1/chat/completions"}
            by_trace: dict[str, set[str]] = {t: set() for t in chats}
            for service, _, trace_id, _, _ in spans:
                if trace_id in chats:
                    by_trace[trace_id].add(service)
            return by_trace

        def exactly_the_sampled_ones_whole() -> bool:
            traces = chat_traces()
            whole = {"autellix-session-api", "autellix-router", "autellix-engine-agent"}
            return set(traces) == sampled and all(whole <= services for services in traces.values())
        assert _wait_for(exactly_the_sampled_ones_whole), \
            f"sampled in the log: {sorted(sampled)}; at the collector: {chat_traces()}"
    finally:
        stop_up(proc)
        collector.stop()
        shutil.rmtree(state_dir, ignore_errors=True)
