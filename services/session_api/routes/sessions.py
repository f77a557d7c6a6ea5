"""`/v1/sessions`: open, read (the process-table view) and close a session (= one program).

`POST` without an id issues one (`s-<32 hex>`, 201). With `{"id": "..."}`, the client's own id: 201
when this request opened it, 200 with the session as it is when it was open already (the name and
workload class given are then ignored), 409 `session_ended` when it has ended. Ids are checked as
everywhere (`session_ids.checked`): a bad one is a 400 naming `id` or `session_id`. A client's id
may hold `/` (the path converter takes the rest of the path); `?`, `#` and `%` travel percent-encoded.
Each operation takes a token of its tenant's session-operation rate (session_ops_limit.py; 429 past it).
"""

from __future__ import annotations

from fastapi import APIRouter, Body, Response

from services.session_api import openapi_links
from services.session_api.deps import CurrentTenant, GatewayDep
from services.session_api.schemas import ErrorResponse, SessionCreate, SessionView

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

_ERRORS = {401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}, 422: {"model": ErrorResponse},
           429: {"model": ErrorResponse}}
_OPENED_LINKS = {"links": openapi_links.from_opened_view()}  # read, close, call in it


@router.post("", response_model=SessionView, status_code=201,
             responses={**_ERRORS, 201: _OPENED_LINKS,
                        200: {"model": SessionView, "description": "the client's id was open already", **_OPENED_LINKS},
                        400: {"model": ErrorResponse}, 409: {"model": ErrorResponse}})
async def open_session(tenant: CurrentTenant, gateway: GatewayDep, response: Response,
                       body: SessionCreate | None = Body(default=None)) -> SessionView:
    gateway.session_ops.admit(tenant.name)
    body = body or SessionCreate()
    view, created = await gateway.open_session(tenant.name, body.name, body.workload_class, body.id)
    if not created:
        response.status_code = 200
    return view


@router.get("/{session_id:path}", response_model=SessionView,
            responses={**_ERRORS, 200: {"links": openapi_links.from_session_view()}, 400: {"model": ErrorResponse}})
async def read_session(session_id: str, tenant: CurrentTenant, gateway: GatewayDep) -> SessionView:
    gateway.session_ops.admit(tenant.name)
    return await gateway.lookup_session(tenant.name, session_id)


@router.delete("/{session_id:path}", response_model=SessionView,
               responses={**_ERRORS, 200: {"links": openapi_links.read_view()},
                          400: {"model": ErrorResponse}, 409: {"model": ErrorResponse}})
async def close_session(session_id: str, tenant: CurrentTenant, gateway: GatewayDep) -> SessionView:
    gateway.session_ops.admit(tenant.name)
    return await gateway.close_session(tenant.name, session_id)
