"""A zero-time OpenAI-compatible server: what a peer comparison puts behind every front end, so
that all the time measured is the front end's own.

    python -m loadgen.live.stub_openai --port 8000 --model tiny --root /path/to/tokenizer

Raw asyncio HTTP/1.1 with keep-alive (no framework: a framework's CPU per request would land in
every side's figure alike and hide the differences). It answers:
- `GET /v1/models`: one model, with `root` (where the mesh's API loads a tokenizer) and
  `max_model_len`;
- `POST /v1/chat/completions`: `max_tokens` tokens ("tok" each) at once, as one JSON answer or, with
  `"stream": true`, as server-sent events in one chunked write (usage last when asked for), or with
  `--token-gap-ms G` one event per write, G ms apart, as a real engine streams (per-token costs show);
- `GET /metrics`: vLLM's load gauges and phase counters at zero (the upstream agent's scrape);
- `GET /health`: 200 (vllm-router's health check).
Anything else is a 404.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

TOKEN = "tok"
MAX_HEAD = 64 * 1024
METRICS = "".join(f"{name} 0\n" for name in (
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:request_prefill_time_seconds_sum", "vllm:request_prefill_time_seconds_count",
    "vllm:request_decode_time_seconds_sum", "vllm:request_generation_tokens_sum",
    "vllm:request_queue_time_seconds_sum", "vllm:request_queue_time_seconds_count")).encode()


def _response(status: int, ctype: str, body: bytes) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body


EVENTS_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def _chunked(events: list[bytes]) -> bytes:
    return EVENTS_HEAD + b"".join(_chunk(e) for e in events) + LAST_CHUNK


class StubServer:
    def __init__(self, model: str, root: str, max_model_len: int, token_gap_s: float = 0.0) -> None:
        self.model = model
        self.token_gap_s = token_gap_s
        models = {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "stub",
                                              "root": root or model, "max_model_len": max_model_len}]}
        self._models = _response(200, "application/json", json.dumps(models).encode())
        self._metrics = _response(200, "text/plain; version=0.0.4", METRICS)
        self._health = _response(200, "application/json", b"{}")
        self._not_found = _response(404, "application/json", b'{"error":{"message":"not found","code":"404"}}')

    def _chat(self, body: bytes) -> bytes | list[bytes]:
        """The answer, or a stream's events (each to be written on its own) when paced."""
        try:
            request = json.loads(body)
            n = max(1, int(request.get("max_tokens") or request.get("max_completion_tokens") or 1))
        except (ValueError, TypeError, AttributeError):
            return _response(400, "application/json", b'{"error":{"message":"bad request","code":"400"}}')
        call_id = f"chatcmpl-{request.get('request_id') or time.monotonic_ns()}"
        prompt = sum(len(str(m.get("content", ""))) for m in request.get("messages") or ()) // 4
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        base = {"id": call_id, "created": int(time.time()), "model": self.model}
        if not request.get("stream"):
            answer = {**base, "object": "chat.completion", "usage": usage, "choices": [{
                "index": 0, "finish_reason": "length",
                "message": {"role": "assistant", "content": TOKEN * n}}]}
            return _response(200, "application/json", json.dumps(answer).encode())
        chunk = {**base, "object": "chat.completion.chunk"}
        events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        events += [{**chunk, "choices": [{"index": 0, "delta": {"content": TOKEN},
                                          "finish_reason": "length" if i == n - 1 else None}]} for i in range(n)]
        if (request.get("stream_options") or {}).get("include_usage"):
            events.append({**chunk, "choices": [], "usage": usage})
        encoded = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]
        return encoded if self.token_gap_s > 0 else _chunked(encoded)

    def answer(self, method: str, path: str, body: bytes) -> bytes | list[bytes]:
        path = path.split("?", 1)[0]
        if method == "POST" and path == "/v1/chat/completions":
            return self._chat(body)
        if method == "GET":
            page = {"/v1/models": self._models, "/metrics": self._metrics, "/health": self._health}.get(path)
            if page is not None:
                return page
        return self._not_found

    async def _paced(self, writer: asyncio.StreamWriter, events: list[bytes]) -> None:
        writer.write(EVENTS_HEAD + _chunk(events[0]))  # the role event at once, as vLLM sends it
        for event in events[1:]:
            await writer.drain()
            await asyncio.sleep(self.token_gap_s)
            writer.write(_chunk(event))
        writer.write(LAST_CHUNK)
        await writer.drain()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                answer = self.answer(method, path, body)
                if isinstance(answer, list):
                    await self._paced(writer, answer)
                    continue
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass  # the client closed (or sent what this stub does not read): drop the connection
        finally:
            writer.close()


async def serve(host: str, port: int, model: str, root: str, max_model_len: int, token_gap_s: float = 0.0) -> None:
    stub = StubServer(model, root, max_model_len, token_gap_s)
    server = await asyncio.start_server(stub.handle, host, port, limit=MAX_HEAD, backlog=1024)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.stub_openai", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", default="tiny")
    p.add_argument("--root", default="", help="tokenizer folder announced in /v1/models (the mesh's API loads it)")
    p.add_argument("--max-model-len", type=int, default=131_072)
    p.add_argument("--token-gap-ms", type=float, default=0.0,
                   help="stream one event per write, this far apart (0: a whole stream in one write)")
    args = p.parse_args(argv)
    if args.token_gap_ms < 0:
        p.error("--token-gap-ms must be >= 0")
    try:
        import uvloop  # the same event loop the services run on, where installed
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.host, args.port, args.model, args.root, args.max_model_len, args.token_gap_ms / 1e3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
