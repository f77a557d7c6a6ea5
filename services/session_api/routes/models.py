"""`/v1/models`: the one served model name (the engines are modeled, so there is exactly one)."""

from __future__ import annotations

from fastapi import APIRouter

from services.session_api.deps import CurrentTenant, SettingsDep
from services.session_api.schemas import ModelCard, ModelList

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.get("", response_model=ModelList)
async def list_models(_: CurrentTenant, settings: SettingsDep) -> ModelList:
    return ModelList(data=[ModelCard(id=settings.model_name, created=0)])
