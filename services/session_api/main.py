"""session_api wiring: settings, keys, the mesh gateway, routers, error handlers; `run()` serves it."""

from __future__ import annotations

import resource
import secrets
import sys
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI

from services.session_api.access_log import AccessLog
from services.session_api.auth import KeyStore
from services.session_api.errors import install_error_handlers
from services.session_api.fast_path import FastCompletions
from services.session_api.gateway import Gateway
from services.session_api.http_protocol import with_header_deadline
from services.session_api.metrics import RequestMetrics
from services.session_api.request_guard import RequestGuard
from services.session_api.routes import completions, health, models, sessions
from services.session_api.settings import SessionApiSettings
from services.session_api.shared_port import serve_on_shared_port
from services.settings_vocabulary import run_mesh_service
from shared.logging import get_logger
from shared.service_process import freeze_startup_heap

DEV_TENANT = "dev"
API_DESCRIPTION = """Program-aware LLM serving: an OpenAI-compatible API where a *session* is an agent
program whose calls are scheduled together (PLAS/ATLAS).

- Send the session as header `X-Session-Id` (forks: `X-Thread-Id`, `X-Parent-Thread-Id`) or body
  field `session_id`; a call without one is a one-call program.
- Tokens are estimated as ceil(characters / 4) per message; the engines are modeled, so response
  text is filler of exactly `max_tokens` tokens by the same estimate.
- Errors use OpenAI's shape: `{"error": {"message", "type", "code", "param"}}`.
"""


def load_keys(settings: SessionApiSettings) -> KeyStore:
    """The configured keys; in development without any, one fresh key for tenant 'dev' (printed)."""
    if settings.autellix_api_keys.strip():
        return KeyStore.parse(settings.autellix_api_keys)
    key = f"sk-dev-{secrets.token_urlsafe(18)}"
    print(f"session_api: no AUTELLIX_API_KEYS; development key for tenant '{DEV_TENANT}': {key}",
          file=sys.stderr, flush=True)
    return KeyStore.parse(f"{DEV_TENANT}:{key}")


def create_app(settings: SessionApiSettings, keys: KeyStore | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.gateway = await Gateway.connect(settings)
        get_logger().info("session_api_started", port=settings.api_port, tenants_keys=app.state.keys.num_keys)
        try:
            yield
        finally:
            await app.state.gateway.close()

    app = FastAPI(title="Autellix", version="0.1.0", lifespan=lifespan, description=API_DESCRIPTION)
    app.state.settings = settings
    app.state.keys = keys or load_keys(settings)
    install_error_handlers(app)
    app.add_middleware(FastCompletions)  # the completion routes' hot path (fast_path.py)
    # outermost: auth, size, time and JSON checks before any route reads the body (request_guard.py)
    app.add_middleware(RequestGuard, max_body_bytes=settings.max_request_bytes,
                       max_json_depth=settings.max_json_depth, body_timeout_s=settings.http_body_timeout_s)
    app.add_middleware(RequestMetrics)  # it sees every answer's status
    app.add_middleware(AccessLog, enabled=settings.access_log)  # outermost: its line times everything
    for module in (sessions, completions, models, health):
        app.include_router(module.router)
    return app


def uvicorn_options(settings: SessionApiSettings) -> dict:
    """How uvicorn serves the app: one write per small answer, and bounded connections (idle
    keep-alive, a header deadline, how many at once)."""
    return {"http": with_header_deadline(settings.http_header_timeout_s),
            "timeout_keep_alive": settings.http_keep_alive_s,
            "limit_concurrency": connection_limit(settings.max_connections)}


FDS_KEPT = 256  # descriptors left for NATS, the database, logs and the process itself
MIN_CONNECTIONS = 64


def connection_limit(max_connections: int | None) -> int | None:
    """MAX_CONNECTIONS if set (0: no limit); else the open-file soft limit less FDS_KEPT."""
    if max_connections is not None:
        return max_connections or None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(MIN_CONNECTIONS, soft - FDS_KEPT)


def run() -> int:
    return run_mesh_service("session_api", SessionApiSettings(), serve)


def serve(settings: SessionApiSettings) -> None:
    """Serve the app on uvicorn's own loop until a signal."""
    app = create_app(settings)
    freeze_startup_heap()  # the collector ran about a tenth of this process's CPU under load
    options = {"log_level": "warning", "access_log": False,
               "log_config": None,  # uvicorn's loggers go through ours (shared/logging.py): same format
               "timeout_graceful_shutdown": settings.shutdown_drain_s, **uvicorn_options(settings)}
    if settings.api_reuse_port:  # one of several workers on the port (shared_port.py)
        serve_on_shared_port(app, settings.api_host, settings.api_port, options, settings.api_worker_port)
        return
    uvicorn.run(app, host=settings.api_host, port=settings.api_port, **options)
