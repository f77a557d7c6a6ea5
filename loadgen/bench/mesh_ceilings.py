"""The ceilings that bound the mesh's calls/s, measured on the stack's own NATS server and the same
loopback, in the same run: a bare uvicorn endpoint answering the same bytes, one NATS
request/reply hop, JetStream publish and pull+ack. Each `measure_*` returns its rate and the CPU
per operation of the processes involved, or {"error": ...} when the ceiling run failed (then no
ratio is taken against it).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import nats

from loadgen.bench import jetstream_rates, nats_echo, servers
from loadgen.bench.cpu import CpuWindow, stack_role

ECHO_SUBJECT_ROOT = "autellix_bench.echo"


def _nats_role(proc) -> str | None:
    return "nats" if stack_role(proc) == "nats" else None


async def guarded(name: str, measure: Callable[[], Awaitable[dict]]) -> dict:
    """A ceiling run's result, or what made it fail (its ratio is then None)."""
    try:
        return await measure()
    except Exception as exc:  # any failure of a ceiling run is reported, never a number against nothing
        return {"error": f"{name}: {type(exc).__name__}: {exc}"}


class CeilingServers:
    """The bare HTTP endpoint and the NATS responder, started once for all repeats."""

    def __init__(self, nats_url: str, stack_pid: int, answer: bytes, reply_bytes: int) -> None:
        self.nats_url = nats_url
        self.stack_pid = stack_pid
        self.answer = answer
        self.reply_bytes = reply_bytes
        self.http_port = servers.free_port()
        self.echo_subject = f"{ECHO_SUBJECT_ROOT}.{uuid.uuid4().hex[:8]}"
        self.bare = self.echo = None
        self._body = None

    def start(self) -> CeilingServers:
        self._body = Path(tempfile.mkstemp(prefix="autellix-bare-", suffix=".json", dir="/tmp")[1])
        self._body.write_bytes(self.answer)
        self.bare = servers.start_module("loadgen.bench.bare_asgi", "--port", str(self.http_port),
                                         "--body-file", str(self._body))
        servers.wait_port(self.http_port, self.bare)
        self.echo = servers.start_module("loadgen.bench.nats_echo", "--url", self.nats_url, "--subject",
                                         self.echo_subject, "--reply-bytes", str(self.reply_bytes),
                                         ready_line="ready")
        return self

    def stop(self) -> None:
        servers.stop(self.bare)
        servers.stop(self.echo)
        if self._body is not None:
            self._body.unlink(missing_ok=True)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    async def measure_http(self, throughput: Callable[[], Awaitable[tuple[float, float]]]) -> dict:
        """`throughput()` -> (calls/s, seconds) against `http_url`, with the mesh's own client."""
        window = CpuWindow({"bare_uvicorn": self.bare.pid}).start()
        rate, seconds = await throughput()
        return {"per_s": rate, "cpu_ms_per_call": window.per_unit_ms(rate * seconds)}

    async def measure_nats_request(self, payload: bytes, seconds: float, concurrency: int) -> dict:
        nc = await nats.connect(self.nats_url, connect_timeout=5)
        try:
            await nc.request(self.echo_subject, payload, timeout=5)  # the responder answers
            window = CpuWindow({"echo_responder": self.echo.pid}, {self.stack_pid: _nats_role}).start()
            t0 = time.perf_counter()
            rate, _ = await nats_echo.request_rate(nc, self.echo_subject, payload, seconds, concurrency)
            cpu = window.per_unit_ms(rate * (time.perf_counter() - t0))
        finally:
            await nc.close()
        return {"per_s": rate, "cpu_ms_per_request": cpu, "request_bytes": len(payload)}

    async def measure_jetstream(self, payload: bytes, num: int, batch: int) -> dict:
        window = CpuWindow({}, {self.stack_pid: _nats_role}).start()
        rates = await asyncio.wait_for(jetstream_rates.measure(self.nats_url, payload, num, batch), 180)
        return {**rates, "cpu_ms_per_message": window.per_unit_ms(num)}
