"""`/v1/sessions`: open, read (the process-table view) and close a session (= one program)."""

from __future__ import annotations

from fastapi import APIRouter, Body

from services.session_api.deps import CurrentTenant, GatewayDep
from services.session_api.schemas import ErrorResponse, SessionCreate, SessionView

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

_ERRORS = {401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}}


@router.post("", response_model=SessionView, status_code=201, responses=_ERRORS)
async def open_session(tenant: CurrentTenant, gateway: GatewayDep,
                       body: SessionCreate | None = Body(default=None)) -> SessionView:
    body = body or SessionCreate()
    return await gateway.open_session(tenant.name, body.name, body.workload_class)


@router.get("/{session_id}", response_model=SessionView, responses=_ERRORS)
async def read_session(session_id: str, tenant: CurrentTenant, gateway: GatewayDep) -> SessionView:
    return await gateway.lookup_session(tenant.name, session_id)


@router.delete("/{session_id}", response_model=SessionView,
               responses={**_ERRORS, 409: {"model": ErrorResponse}})
async def close_session(session_id: str, tenant: CurrentTenant, gateway: GatewayDep) -> SessionView:
    return await gateway.close_session(tenant.name, session_id)
