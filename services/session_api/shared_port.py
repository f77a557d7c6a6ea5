"""Several session API workers on one port: each binds it with SO_REUSEPORT and the kernel spreads
new connections over them (`autellix up --api-workers N`). Linux and the BSDs have the option."""

from __future__ import annotations

import socket
import sys

import uvicorn

STARTUP_FAILURE = 3  # uvicorn.run's exit status when the server never started


def reuse_port_socket(host: str, port: int) -> socket.socket:
    if not hasattr(socket, "SO_REUSEPORT"):
        raise ValueError("API_REUSE_PORT needs SO_REUSEPORT, which this platform lacks; run one worker")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def serve_on_shared_port(app, host: str, port: int, options: dict) -> None:
    """uvicorn.run, on a socket the other workers share."""
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **options))
    server.run(sockets=[reuse_port_socket(host, port)])
    if not server.started:
        sys.exit(STARTUP_FAILURE)
