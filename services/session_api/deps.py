"""Named dependencies, so handler signatures read as intent (`tenant: CurrentTenant`).

All are `async def`: FastAPI runs a plain `def` dependency in its thread pool, a thread hop per
dependency per request (measured: most of the API's per-call CPU went to those hops)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from services.session_api import metrics
from services.session_api.auth import KeyStore, Tenant
from services.session_api.errors import unauthorized
from services.session_api.gateway import Gateway
from services.session_api.settings import SessionApiSettings


def _keys(request: Request) -> KeyStore:
    return request.app.state.keys


async def current_tenant(request: Request) -> Tenant:
    header = request.headers.get("authorization")
    if not header:
        raise unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise unauthorized("malformed Authorization header: expected 'Bearer <key>'")
    tenant = _keys(request).tenant_for(key.strip())
    if tenant is None:
        raise unauthorized("invalid API key")
    metrics.note_tenant(tenant.name)
    return tenant


async def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def _settings(request: Request) -> SessionApiSettings:
    return request.app.state.settings


CurrentTenant = Annotated[Tenant, Depends(current_tenant)]
GatewayDep = Annotated[Gateway, Depends(_gateway)]
SettingsDep = Annotated[SessionApiSettings, Depends(_settings)]
