"""The Prometheus endpoint of a service that has no HTTP server of its own (METRICS_PORT; 0: none).

prometheus_client serves the default registry from a daemon thread: a scrape never waits on the
service's event loop, and the loop never waits on a scrape."""

from __future__ import annotations

from prometheus_client import start_http_server

from shared.logging import get_logger
from shared.settings import MeshSettings


def serve_metrics(settings: MeshSettings, service: str) -> int:
    """Start serving /metrics when METRICS_PORT is set; returns the port (0: not serving)."""
    if not settings.metrics_port:
        return 0
    server, _ = start_http_server(settings.metrics_port, addr=settings.metrics_host)
    port = server.server_address[1]
    get_logger().info("metrics_serving", service=service, host=settings.metrics_host, port=port)
    return port
