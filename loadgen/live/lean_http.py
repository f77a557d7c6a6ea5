"""A lean HTTP/1.1 client for load harnesses: keep-alive JSON POSTs over a fixed pool of raw
asyncio connections, one request per connection at a time.

Why not httpx: on these 2-core machines httpx cost about 2.9 ms of CPU per call, more than any
service of the stack, and with hundreds of requests waiting for its pool it assigns them in
O(waiting x connections), so a harness that falls behind collapses by itself (the stack idles
while the client crawls). Answers must carry Content-Length (every non-streaming answer of the API
does); anything else is an error. `send_timed` also reads chunked answers (server-sent events) and
notes when the first generated token arrived.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from urllib.parse import urlsplit

ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)
# a streamed chunk that carries generated text (vLLM writes `"content":"x"`, others `"content": "x"`);
# the first event's empty `"content":""` (the role) is not a token
_TOKEN = re.compile(rb'"content": ?"[^"]')


class LeanHttpPool:
    def __init__(self, url: str, size: int) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"lean client needs http://host:port, got {url!r}")
        self._host, self._port, self._size = parts.hostname, parts.port, size
        self._pool: asyncio.Queue = asyncio.Queue()

    async def __aenter__(self) -> LeanHttpPool:
        for _ in range(self._size):
            self._pool.put_nowait(await self._connect())
        return self

    async def __aexit__(self, *exc) -> None:
        while not self._pool.empty():
            _, writer = self._pool.get_nowait()
            writer.close()

    async def _connect(self):
        return await asyncio.open_connection(self._host, self._port)

    def request_bytes(self, path: str, body: dict | bytes, headers: dict[str, str]) -> bytes:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (f"POST {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n{head}"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """(status, body) of one prepared request (`request_bytes`). Raises `ERRORS` on a broken
        connection or an answer this client cannot read."""
        status, data, _ = await self._exchange(request, chunked_ok=False)
        return status, data

    async def send_timed(self, request: bytes) -> tuple[int, bytes, float | None]:
        """(status, body, perf_counter() when the first generated token arrived, or None) of one
        prepared request; the answer may be chunked (a stream)."""
        return await self._exchange(request, chunked_ok=True)

    async def _exchange(self, request: bytes, chunked_ok: bool) -> tuple[int, bytes, float | None]:
        reader, writer = await self._pool.get()
        first = None
        try:
            writer.write(request)
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                if getattr(exc, "partial", b""):
                    raise
                # not a byte back: the server had closed this idle keep-alive connection (servers
                # do after a few seconds); the request never reached it, so send it once more anew
                writer.close()
                reader, writer = await self._connect()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            if chunked_ok and fields.get("transfer-encoding", "").lower() == "chunked":
                data, first = await _read_chunked(reader)
            elif "content-length" in fields:
                data = await reader.readexactly(int(fields["content-length"]))
                first = time.perf_counter() if chunked_ok and _TOKEN.search(data) else None
            else:
                raise ValueError(f"answer without Content-Length: {lines[0]!r}")
        except BaseException:
            writer.close()  # a half-read answer leaves the connection unusable
            try:
                self._pool.put_nowait(await self._connect())
            except OSError:
                self._pool.put_nowait((reader, writer))  # the next use fails and retries the connect
            raise
        self._pool.put_nowait((reader, writer))
        return status, data, first

    async def post_json(self, path: str, body: dict | bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        return await self.send(self.request_bytes(path, body, headers))


async def _read_chunked(reader: asyncio.StreamReader) -> tuple[bytes, float | None]:
    parts: list[bytes] = []
    first = None
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers are sent by the servers measured
            return b"".join(parts), first
        chunk = (await reader.readexactly(size + 2))[:-2]
        if first is None and _TOKEN.search(chunk):
            first = time.perf_counter()
        parts.append(chunk)
