"""Controller settings: the mesh settings plus STARVATION_BETA (a number, or "none" to disable),
STARVATION_MIN_SERVICE_S, PROMOTION_COOLDOWN_S, DECISION_INTERVAL_S, SNAPSHOT_MAX_AGE_S, and the
tenant fair share: TENANT_FAIR_SHARE (on by default), TENANT_HALF_LIFE_S, TENANT_SHARE_TOLERANCE
and TENANT_WEIGHTS ("acme=2,beta=0.5"; a tenant not named weighs 1)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from shared.core.promotion_planner import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_DECISION_INTERVAL_S,
    DEFAULT_SNAPSHOT_MAX_AGE_S,
)
from shared.core.tenant_share import TenantShareConfig, parse_tenant_weights
from shared.settings import MeshSettings

SERVICE_NAME = "controller"


class ControllerSettings(MeshSettings):
    env_prefixes: ClassVar[tuple[str, ...]] = ("AUTELLIX_", "STARVATION_", "PROMOTION_", "TENANT_")
    starvation_beta: float | None = Field(default=5.0, gt=0)  # paper's useful range 3-7
    starvation_min_service_s: float = Field(default=1.0, gt=0)  # denominator floor (one quantum)
    # the planner's defaults, which the simulator runs too (shared/core/promotion_planner.py)
    promotion_cooldown_s: float = Field(default=DEFAULT_COOLDOWN_S, ge=0)
    decision_interval_s: float = Field(default=DEFAULT_DECISION_INTERVAL_S, gt=0)
    snapshot_max_age_s: float = Field(default=DEFAULT_SNAPSHOT_MAX_AGE_S, gt=0)
    tenant_fair_share: bool = True  # over-entitled tenants' calls go behind the others' (engines)
    tenant_half_life_s: float = Field(default=TenantShareConfig.half_life_s, gt=0, allow_inf_nan=False)
    tenant_share_tolerance: float = Field(default=TenantShareConfig.tolerance, ge=0, allow_inf_nan=False)
    tenant_weights: str = ""

    @field_validator("tenant_weights")
    @classmethod
    def _weights_parse(cls, v: str) -> str:
        parse_tenant_weights(v)  # raises with the variable's name
        return v

    def tenant_share_config(self) -> TenantShareConfig:
        return TenantShareConfig(half_life_s=self.tenant_half_life_s, tolerance=self.tenant_share_tolerance,
                                 weights=parse_tenant_weights(self.tenant_weights))

    @field_validator("starvation_beta", mode="before")
    @classmethod
    def _none_disables(cls, v: Any) -> Any:
        return None if isinstance(v, str) and v.strip().lower() in ("none", "off", "") else v
