"""A lean NATS connection for one JetStream pull consumer's firehose: its own socket, one inbox
subscription, the pull requests, and acks written a batch at a time.

Why not the process's nats-py client: per delivery nats-py runs a regex parse, builds a `Msg`,
queues it, and wakes a task that awaits a coroutine callback; per ack it awaits a `publish`.
Measured on one machine, draining 100,000 deliveries with acks through the same pull consumer:
12.3-13.0 us of CPU per message through nats-py against 3.4-4.1 us here
(`python -m loadgen.bench.pull_paths`; `docs/results/process_table_drain/README.md`). Deliveries
are parsed in `data_received` and handed to `on_msg` synchronously; a batch's acks are one write.

What a consumer needs of a connection and no more: user/password from the URL, TLS when the URL
says `tls://` or the server requires it (the default context, so `SSL_CERT_FILE` applies), pings to
notice a dead link, and reconnects forever across the configured servers and those the cluster
announces. Nothing is published here but pull requests and acks: a write while disconnected is
dropped for a pull request (the consumer asks again on reconnect) and kept for acks (sent after
the reconnect; one lost anyway is redelivered after `ack_wait`, and the owner is idempotent).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from shared.bus.connection import (
    MAX_OUTSTANDING_PINGS,
    PING_INTERVAL_S,
    RECONNECT_WAIT_S,
    SERVER_CONNECT_TIMEOUT_S,
    inbox_prefix,
    is_permission_violation,
    redact_url,
    split_credentials,
    url_user,
)
from shared.bus.errors import BusError, ConnectFailed
from shared.bus.reconnect import ServerPicker
from shared.logging import get_logger

LEAN_SCHEMES = ("nats", "tls")  # websockets stay with nats-py
_SID = b"1"
_KEPT_ACK_BYTES = 8 << 20  # acks kept for a reconnect, at most (the rest come back after ack_wait)
STATUS, DESCRIPTION = "Status", "Description"  # nats-py's header names for a status message

ACK, NAK, TERM, IN_PROGRESS = b"", b"-NAK", b"+TERM", b"+WPI"


def _unquoted(part: str | None) -> str | None:
    return None if part is None else unquote(part)


def supports(url: str) -> bool:
    return all(urlsplit(s.strip()).scheme in LEAN_SCHEMES for s in url.split(","))


@dataclass(frozen=True, slots=True)
class DeliveryMetadata:
    num_delivered: int
    stream_sequence: int


class LeanMsg:
    """One delivery: what nats-py's `Msg` offers a pull consumer, acks included. The ack subject
    stays bytes, as it came and as the acks write it."""
    __slots__ = ("subject", "ack_subject", "data", "headers", "link")

    def __init__(self, subject: str, ack_subject: bytes, data: bytes, headers: dict[str, str] | None,
                 link: LeanLink) -> None:
        self.subject = subject
        self.ack_subject = ack_subject
        self.data = data
        self.headers = headers
        self.link = link

    @property
    def reply(self) -> str:
        return self.ack_subject.decode()

    @property
    def metadata(self) -> DeliveryMetadata:
        """From the ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>... (v1) or
        $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<stream seq>... (v2)."""
        tokens = self.reply.split(".")
        first = 4 if len(tokens) < 11 else 6
        try:
            return DeliveryMetadata(int(tokens[first]), int(tokens[first + 1]))
        except (IndexError, ValueError):
            raise ValueError(f"not a JetStream delivery: reply {self.reply!r}") from None

    async def ack(self) -> None:
        self.link.send_acks((self,), ACK)

    async def nak(self, delay: float | None = None) -> None:
        self.link.send_acks((self,), nak_payload(delay))

    async def term(self) -> None:
        self.link.send_acks((self,), TERM)

    async def in_progress(self) -> None:
        self.link.send_acks((self,), IN_PROGRESS)


def nak_payload(delay_s: float | None) -> bytes:
    return NAK if delay_s is None else NAK + b" " + json.dumps({"delay": int(delay_s * 1e9)}).encode()


def _parse_headers(block: bytes) -> dict[str, str]:
    lines = block.decode("utf-8", "replace").split("\r\n")
    headers: dict[str, str] = {}
    status = lines[0][len("NATS/1.0"):].strip()
    if status:
        code, _, description = status.partition(" ")
        headers[STATUS] = code
        if description:
            headers[DESCRIPTION] = description
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep:
            headers[key.strip()] = value.strip()
    return headers


class _Wire(asyncio.Protocol):
    def __init__(self, link: LeanLink) -> None:
        self.link = link
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.link._feed(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.link._lost(self)


@dataclass(frozen=True, slots=True)
class _Server:
    uri: SplitResult  # what ServerPicker reads


class LeanLink:
    """Open with `await LeanLink.open(...)`; `inbox` receives the deliveries, `on_msg` gets each."""

    def __init__(self, url: str, name: str, on_msg: Callable[[LeanMsg], None],
                 on_reconnect: Callable[[], None] | None = None) -> None:
        if not supports(url):
            raise ValueError(f"the lean link speaks {', '.join(LEAN_SCHEMES)} only: {redact_url(url)}")
        servers, credentials = split_credentials(url)
        self.servers = [_Server(urlsplit(s)) for s in servers]
        self.user, self.password = credentials.get("user"), credentials.get("password")
        if self.user is None:  # a URL list naming users differently: each server keeps its own
            self.user, self.password = _unquoted(self.servers[0].uri.username), _unquoted(self.servers[0].uri.password)
        self.name = name
        self.inbox = f"{inbox_prefix(url)}.{uuid.uuid4().hex}"
        self.on_msg = on_msg
        self.on_reconnect = on_reconnect
        self.log = get_logger(nats_url=redact_url(url), client=name, user=url_user(url))
        self.picker = ServerPicker(RECONNECT_WAIT_S)
        self._wire: _Wire | None = None
        self._buf = bytearray()
        self._handshake: asyncio.Future | None = None  # the current connection's first PONG (or -ERR)
        self._connected = False  # handshake done on `_wire`: deliveries and writes flow
        self._info_seen = asyncio.Event()  # the server's INFO arrived (each connection starts with one)
        self._info: dict[str, Any] = {}
        self._kept_acks: list[bytes] = []
        self._kept_bytes = 0
        # a PING's entry until its PONG (answered in order): None for the keep-alive's, a future for a flush's
        self._pings: deque[asyncio.Future | None] = deque()
        self._subscribed = True
        self._closing = False
        self._tasks: set[asyncio.Task] = set()
        self.num_reconnects = 0

    @classmethod
    async def open(cls, url: str, name: str, on_msg: Callable[[LeanMsg], None],
                   on_reconnect: Callable[[], None] | None = None, connect_timeout_s: float = 5.0) -> LeanLink:
        link = cls(url, name, on_msg, on_reconnect)
        try:
            await asyncio.wait_for(link._connect_any(first=True), timeout=connect_timeout_s)
        except TimeoutError:
            await link.close()
            raise ConnectFailed(f"NATS at {redact_url(url)}: no server answered within {connect_timeout_s:g}s") from None
        except BaseException:
            await link.close()
            raise
        await link.flush()  # the inbox subscription is in place when this returns
        link._spawn(link._keep_pinging())
        return link

    @property
    def is_connected(self) -> bool:
        return self._wire is not None and self._connected

    # --- writing -------------------------------------------------------------------------------------
    def publish(self, subject: str, payload: bytes, reply: str = "") -> None:
        """A pull request: raises `BusError` while disconnected (the consumer asks again later)."""
        if not self.is_connected:
            raise BusError(f"{self.name}: the NATS connection is down")
        head = f"PUB {subject} {reply} {len(payload)}\r\n" if reply else f"PUB {subject} {len(payload)}\r\n"
        self._wire.transport.write(head.encode() + payload + b"\r\n")

    def send_acks(self, msgs: Iterable[LeanMsg], payload: bytes) -> None:
        """One write for all of them; kept for the reconnect while disconnected."""
        tail = f" {len(payload)}\r\n".encode() + payload + b"\r\n"
        data = b"".join([b"PUB " + m.ack_subject + tail for m in msgs])
        if not data:
            return
        if self.is_connected:
            self._wire.transport.write(data)
        elif self._kept_bytes + len(data) <= _KEPT_ACK_BYTES:
            self._kept_acks.append(data)
            self._kept_bytes += len(data)

    def unsubscribe(self) -> None:
        """No more deliveries; acks still go out until `close()`."""
        self._subscribed = False
        if self.is_connected:
            self._wire.transport.write(b"UNSUB " + _SID + b"\r\n")

    async def flush(self, timeout_s: float = 2.0) -> bool:
        """Wait until the server has read everything written so far (its answer to a PING)."""
        if not self.is_connected:
            return False
        pong = asyncio.get_running_loop().create_future()
        self._pings.append(pong)
        self._wire.transport.write(b"PING\r\n")
        try:
            await asyncio.wait_for(pong, timeout_s)
            return True
        except TimeoutError:
            return False

    # --- reading -------------------------------------------------------------------------------------
    def _feed(self, wire: _Wire, data: bytes) -> None:
        if wire is not self._wire:
            return
        buf = self._buf
        buf += data
        pos, end_of_data = 0, len(buf)
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            op = buf[pos:pos + 4]
            if op == b"MSG ":
                parts = bytes(buf[pos + 4:eol]).split(b" ")
                end = eol + 2 + int(parts[-1])
                if end + 2 > end_of_data:
                    break
                reply = parts[2] if len(parts) == 4 else b""
                self.on_msg(LeanMsg(parts[0].decode(), reply, bytes(buf[eol + 2:end]), None, self))
                pos = end + 2
            elif op == b"HMSG":
                parts = bytes(buf[pos + 5:eol]).split(b" ")
                header_size, total = int(parts[-2]), int(parts[-1])
                end = eol + 2 + total
                if end + 2 > end_of_data:
                    break
                headers = _parse_headers(bytes(buf[eol + 2:eol + 2 + header_size]))
                reply = parts[2] if len(parts) == 5 else b""
                self.on_msg(LeanMsg(parts[0].decode(), reply, bytes(buf[eol + 2 + header_size:end]), headers, self))
                pos = end + 2
            else:
                self._control(bytes(buf[pos:eol]))
                pos = eol + 2
        del buf[:pos]

    def _control(self, line: bytes) -> None:
        if line == b"PING":
            self._wire.transport.write(b"PONG\r\n")
        elif line == b"PONG":
            if not self._connected:
                if self._handshake is not None and not self._handshake.done():
                    self._handshake.set_result(None)
            elif self._pings:
                waiter = self._pings.popleft()
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
        elif line.startswith(b"INFO "):
            self._info = json.loads(line[5:])
            self._info_seen.set()
        elif line.startswith(b"-ERR"):
            error = line[4:].strip().strip(b"'").decode("utf-8", "replace")
            if not self._connected and self._handshake is not None and not self._handshake.done():
                self._handshake.set_exception(ConnectFailed(f"NATS refused {self.name}: {error}"))
            elif is_permission_violation(Exception(error)):
                self.log.error("nats_permission_denied", error=error)
            else:
                self.log.warning("nats_error", error=error)

    # --- connecting ----------------------------------------------------------------------------------
    async def _connect_any(self, first: bool) -> None:
        """Try the servers in turn (the picker's order) until one takes us."""
        while not self._closing:
            pool = self.servers + [_Server(urlsplit(f"{self.servers[0].uri.scheme}://{hp}"))
                                   for hp in self._info.get("connect_urls", [])
                                   if hp not in {s.uri.netloc.rpartition("@")[2] for s in self.servers}]
            server, wait_s = self.picker(pool, self._info)
            if wait_s:
                await asyncio.sleep(wait_s)
            try:
                await asyncio.wait_for(self._connect(server.uri), timeout=SERVER_CONNECT_TIMEOUT_S)
            except ConnectFailed:
                raise  # refused credentials: trying again will not help
            except (OSError, TimeoutError, ssl.SSLError, ValueError) as exc:
                self._drop_wire()
                if first and len(self.servers) == 1:
                    raise ConnectFailed(f"NATS at {redact_url(server.uri.geturl())}: {type(exc).__name__}: {exc}") from exc
                self.log.warning("lean_connect_failed", server=server.uri.netloc.rpartition("@")[2], error=str(exc))
                continue
            self.picker.connected(server.uri.netloc)
            return

    async def _connect(self, uri: SplitResult) -> None:
        loop = asyncio.get_running_loop()
        self._buf.clear()
        self._info_seen = asyncio.Event()
        self._handshake = loop.create_future()
        transport, wire = await loop.create_connection(self._new_wire, uri.hostname, uri.port or 4222)
        await self._info_seen.wait()
        if self._handshake.done():  # lost before the INFO
            await self._handshake
        if uri.scheme == "tls" or self._info.get("tls_required"):
            wire.transport = await loop.start_tls(transport, wire, ssl.create_default_context(),
                                                  server_hostname=uri.hostname)
        user = _unquoted(uri.username) or self.user
        password = _unquoted(uri.password) or self.password
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True,
                   "protocol": 1, "lang": "python", "version": "lean", "name": self.name}
        if user is not None:
            connect.update(user=user, **({"pass": password} if password is not None else {}))
        wire.transport.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        await self._handshake  # PONG, or -ERR (refused credentials)
        if self._wire is not wire:  # lost right after its PONG
            raise OSError("connection lost after the handshake")
        self._connected = True
        self._pings.clear()  # a flush waiting on the old connection times out
        subscribe = f"SUB {self.inbox} ".encode() + _SID + b"\r\n" if self._subscribed else b""
        wire.transport.write(subscribe + b"".join(self._kept_acks))
        self._kept_acks, self._kept_bytes = [], 0

    def _new_wire(self) -> _Wire:
        # current from its first byte: the server's INFO may arrive before create_connection returns
        self._wire = _Wire(self)
        return self._wire

    def _drop_wire(self) -> None:
        wire, self._wire, self._connected = self._wire, None, False
        if wire is not None and wire.transport is not None:
            wire.transport.abort()

    def _lost(self, wire: _Wire) -> None:
        if wire is not self._wire:
            return
        self._wire = None
        if not self._connected:  # during a handshake: `_connect` fails now rather than at its timeout
            self._info_seen.set()
            if self._handshake is not None and not self._handshake.done():
                self._handshake.set_exception(OSError("connection lost during the handshake"))
            return
        self._connected = False
        if not self._closing:
            self.log.warning("nats_disconnected")
            self._spawn(self._reconnect())

    async def _reconnect(self) -> None:
        """Until connected again or closed: a refusal (say, a password rotated before this process
        restarted) is logged and tried again, as nats-py does."""
        while not self._closing:
            try:
                await self._connect_any(first=False)
                break
            except ConnectFailed as exc:
                self.log.error("lean_reconnect_refused", error=str(exc))
                await asyncio.sleep(RECONNECT_WAIT_S)
        if self._closing:
            return
        self.num_reconnects += 1
        self.log.info("nats_reconnected", server=self.picker.current.rpartition("@")[2])
        if self.on_reconnect is not None:
            self.on_reconnect()

    async def _keep_pinging(self) -> None:
        while not self._closing:
            await asyncio.sleep(PING_INTERVAL_S)
            if not self.is_connected:
                continue
            if len(self._pings) >= MAX_OUTSTANDING_PINGS:  # the link is dead; the kernel may not know yet
                self.log.warning("nats_stale_connection", pings_unanswered=len(self._pings))
                self._drop_wire_and_reconnect()
                continue
            self._pings.append(None)
            self._wire.transport.write(b"PING\r\n")

    def _drop_wire_and_reconnect(self) -> None:
        self._drop_wire()
        self._spawn(self._reconnect())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro, name=f"lean:{self.name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # a bug: say so, never die quietly
            self.log.error("lean_link_task_failed", task=task.get_name(), error=repr(task.exception()))

    async def close(self) -> None:
        """Flush what was written and close; acks that never reached the server (a link down at
        the end) come back after ack_wait."""
        if self._closing:
            return
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        flushed = await self.flush()
        if not flushed and self._kept_acks:
            self.log.warning("lean_acks_not_sent", num_bytes=self._kept_bytes)
        wire, self._wire = self._wire, None
        if wire is not None and wire.transport is not None:
            wire.transport.close()
