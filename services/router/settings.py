"""router settings (environment variables, validated; see shared.settings for the common ones)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from shared.core.routing import RouterName, parse_router
from shared.settings import MeshSettings


class RouterSettings(MeshSettings):
    env_prefixes: ClassVar[tuple[str, ...]] = ("AUTELLIX_", "ROUTER_", "AFFINITY_")
    router_policy: RouterName = RouterName.LOCALITY
    locality_threshold_tokens: int = Field(default=2048, ge=0)  # the paper's threshold
    engine_ttl_s: float = Field(default=3.0, gt=0)  # an engine silent this long has left
    engine_request_timeout_s: float = Field(default=2.0, gt=0)
    # session affinity (issue 6; services/router/affinity_chooser.py): on, a session's calls stick
    # to the engine holding its KV and router_policy is not used; the stealing knobs of SAGA
    router_affinity: bool = False
    affinity_t_idle_s: float = Field(default=0.1, ge=0)
    affinity_r_max: float = Field(default=2.0, ge=1)
    affinity_max_migrations_per_task: int = Field(default=3, ge=0)
    affinity_work_stealing: bool = True  # with affinity: idle engines steal queued sessions
    affinity_steal_interval_s: float = Field(default=0.1, gt=0)  # one stealing plan per epoch

    @field_validator("router_policy", mode="before")
    @classmethod
    def _parse(cls, v: object) -> object:
        return parse_router(v) if isinstance(v, str) else v
