"""Several session API workers on one port: each binds it with SO_REUSEPORT and the kernel spreads
new connections over them (`autellix up --api-workers N`). Linux and the BSDs have the option.

The kernel picks the worker by a hash of each new connection, so a probe of the shared port says
only that some worker answers. Each worker may therefore also listen on a port of its own
(API_WORKER_PORT) that answers only /livez, /healthz and /metrics: the supervisor waits for every
worker there, and Prometheus scrapes each worker's own counters."""

from __future__ import annotations

import json
import socket
import sys

import uvicorn

STARTUP_FAILURE = 3  # uvicorn.run's exit status when the server never started
WORKER_PORT_PATHS = frozenset({"/livez", "/healthz", "/metrics"})
_NOT_HERE = json.dumps({"error": {"message": "a worker's own port serves only /livez, /healthz and /metrics; "
                                             "the API is on the shared port", "type": "not_found_error",
                                  "code": "not_found", "param": None}}).encode()


def reuse_port_socket(host: str, port: int) -> socket.socket:
    if not hasattr(socket, "SO_REUSEPORT"):
        raise ValueError("API_REUSE_PORT needs SO_REUSEPORT, which this platform lacks; run one worker")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def own_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))  # a port in use fails here, before the worker serves anything
    sock.set_inheritable(True)
    return sock


class WorkerPortPaths:
    """ASGI wrapper: on the worker's own port, anything but its probes and metrics is a 404 (the
    API has one front door, the shared port)."""

    def __init__(self, app, worker_port: int) -> None:
        self.app = app
        self.worker_port = worker_port

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] == "http" and scope["path"] not in WORKER_PORT_PATHS
                and (scope.get("server") or ("", 0))[1] == self.worker_port):
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(_NOT_HERE)).encode())]})
            await send({"type": "http.response.body", "body": _NOT_HERE})
            return
        await self.app(scope, receive, send)


def serve_on_shared_port(app, host: str, port: int, options: dict, worker_port: int = 0) -> None:
    """uvicorn.run, on a socket the other workers share (and on the worker's own port when given).
    The shared socket comes first: uvicorn listens on them in order, so an answer on the own port
    means the shared one listens too."""
    sockets = [reuse_port_socket(host, port)]
    if worker_port:
        sockets.append(own_socket(host, worker_port))
        app = WorkerPortPaths(app, worker_port)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **options))
    server.run(sockets=sockets)
    if not server.started:
        sys.exit(STARTUP_FAILURE)
