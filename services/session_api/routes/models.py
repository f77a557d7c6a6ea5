"""`/v1/models`: the models the live engines serve (from their heartbeats)."""

from __future__ import annotations

from fastapi import APIRouter

from services.session_api.deps import CurrentTenant, GatewayDep
from services.session_api.schemas import ModelCard, ModelList

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.get("", response_model=ModelList)
async def list_models(_: CurrentTenant, gateway: GatewayDep) -> ModelList:
    served = gateway.models.served(gateway.live_engines())
    return ModelList(data=[ModelCard(id=name, created=0) for name in sorted(served)])
