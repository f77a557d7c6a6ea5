"""router settings (environment variables, validated; see shared.settings for the common ones)."""

from __future__ import annotations

from pydantic import Field, field_validator

from shared.core.routing import RouterName, parse_router
from shared.settings import MeshSettings


class RouterSettings(MeshSettings):
    router_policy: RouterName = RouterName.LOCALITY
    locality_threshold_tokens: int = Field(default=2048, ge=0)  # the paper's threshold
    engine_ttl_s: float = Field(default=3.0, gt=0)  # an engine silent this long has left
    engine_request_timeout_s: float = Field(default=2.0, gt=0)

    @field_validator("router_policy", mode="before")
    @classmethod
    def _parse(cls, v: object) -> object:
        return parse_router(v) if isinstance(v, str) else v
