"""The zero-time OpenAI-compatible stub, read by the lean client: whole answers, chunked streams
with the first token noted, the scrape pages, a 404; and a keep-alive connection the server
closed while idle is reopened for the next request."""

from __future__ import annotations

import json
import time

from loadgen.bench import servers
from loadgen.live.lean_http import LeanHttpPool


def _stub(tmp_path, *extra: str):
    port = servers.free_port()
    proc = servers.start_module("loadgen.live.stub_openai", "--port", str(port), "--model", "tiny",
                                "--root", str(tmp_path), *extra)
    servers.wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


async def test_stub_answers_as_an_openai_server(tmp_path):
    proc, url = _stub(tmp_path)
    try:
        async with LeanHttpPool(url, 1) as pool:
            body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
            status, data = await pool.post_json("/v1/chat/completions", body, {})
            answer = json.loads(data)
            assert status == 200 and answer["usage"]["completion_tokens"] == 3
            assert answer["choices"][0]["message"]["content"] == "toktoktok"
            stream = {**body, "stream": True, "stream_options": {"include_usage": True}}
            t0 = time.perf_counter()
            request = pool.request_bytes("/v1/chat/completions", stream, {})
            status, data, first = await pool.send_timed(request)
            assert status == 200 and first is not None and first >= t0
            events = [json.loads(e[6:]) for e in data.decode().split("\n\n") if e.startswith("data: {")]
            assert "".join(c["delta"].get("content", "") for e in events for c in e["choices"]) == "toktoktok"
            assert events[-1]["usage"]["completion_tokens"] == 3 and data.endswith(b"data: [DONE]\n\n")
            bad = pool.request_bytes("/nowhere", {}, {})
            assert (await pool.send(bad))[0] == 404
    finally:
        servers.stop(proc)


async def test_a_paced_stream_sends_the_same_events_a_gap_apart(tmp_path):
    proc, url = _stub(tmp_path, "--token-gap-ms", "20")
    try:
        async with LeanHttpPool(url, 1) as pool:
            body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                    "stream": True}
            t0 = time.perf_counter()
            status, data, first = await pool.send_timed(pool.request_bytes("/v1/chat/completions", body, {}))
            end = time.perf_counter()
            events = [json.loads(e[6:]) for e in data.decode().split("\n\n") if e.startswith("data: {")]
            assert status == 200 and len(events) == 4 and data.endswith(b"data: [DONE]\n\n")
            assert first - t0 < 0.5 * (end - t0) and end - t0 >= 0.06  # the role at once, then 4 gaps
    finally:
        servers.stop(proc)


async def test_models_and_metrics_pages(tmp_path):
    import httpx

    proc, url = _stub(tmp_path)
    try:
        async with httpx.AsyncClient(base_url=url) as http:
            models = (await http.get("/v1/models")).json()["data"]
            assert models[0]["id"] == "tiny" and models[0]["root"] == str(tmp_path)
            assert "vllm:num_requests_running 0" in (await http.get("/metrics")).text
            assert (await http.get("/health")).status_code == 200
    finally:
        servers.stop(proc)


async def test_a_connection_the_server_closed_is_reopened(tmp_path):
    proc, url = _stub(tmp_path)
    try:
        async with LeanHttpPool(url, 1) as pool:
            body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
            assert (await pool.post_json("/v1/chat/completions", body, {}))[0] == 200
            servers.stop(proc)  # the server goes away, closing the idle connection ...
            proc, url2 = _restart(tmp_path, url)
            # ... and the next request goes out on a new one
            assert (await pool.post_json("/v1/chat/completions", body, {}))[0] == 200
    finally:
        servers.stop(proc)


def _restart(tmp_path, url: str):
    port = url.rsplit(":", 1)[1]
    proc = servers.start_module("loadgen.live.stub_openai", "--port", port, "--model", "tiny", "--root", str(tmp_path))
    servers.wait_port(int(port), proc)
    return proc, url
