"""Free TCP ports and waiting for a server to accept connections."""

from __future__ import annotations

import random
import socket
import threading
import time
from pathlib import Path

# Listening ports are picked below the kernel's ephemeral range. A port from that range (what
# binding port 0 returns) can be taken as the source port of any outgoing connection between this
# check and the server's own bind: a stack's controller once failed to start in CI with its metrics
# port "already in use" while the other services were connecting. Below the range only an explicit
# bind can take it.
LOWEST_PORT = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()  # never the same port twice from one process
_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):  # not Linux: no range to keep out of
        return 0


def _binds(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now, below the ephemeral range where there is room (else the
    OS picks one). A race with another process's explicit bind remains, as always."""
    low = _ephemeral_low()
    with _lock:
        if low - LOWEST_PORT >= 1_000:
            pick = random.SystemRandom()
            for _ in range(256):
                port = pick.randrange(LOWEST_PORT, low)
                if port not in _handed_out and _binds(host, port):
                    _handed_out.add(port)
                    return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        _handed_out.add(port)
        return port


def wait_for_tcp(host: str, port: int, timeout_s: float, alive: callable = lambda: True) -> None:
    """Block until host:port accepts a connection; TimeoutError after `timeout_s`.
    `alive()` returning False (the process died) raises RuntimeError at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not alive():
            raise RuntimeError(f"server for {host}:{port} exited before accepting connections")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{host}:{port} not accepting connections after {timeout_s:g} s") from None
            time.sleep(0.01)
