"""Free TCP ports and waiting for a server to accept connections."""

from __future__ import annotations

import socket
import time


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it; a tiny race remains, as always)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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
