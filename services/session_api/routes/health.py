"""`/livez` (the process serves), `/healthz` (ready: the bus is connected and engines are live) and
`/metrics`."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.session_api.deps import GatewayDep

router = APIRouter(tags=["operations"])


@router.get("/livez")
async def livez() -> JSONResponse:
    # plain liveness, for probes that restart a stuck process: engines come and go on their own
    return JSONResponse({"ok": True})


@router.get("/healthz")
async def healthz(gateway: GatewayDep) -> JSONResponse:
    status = gateway.health()
    return JSONResponse(status, 200 if status["ok"] else 503)


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
