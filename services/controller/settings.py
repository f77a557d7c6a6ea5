"""Controller settings: the mesh settings plus STARVATION_BETA (a number, or "none" to disable),
STARVATION_MIN_SERVICE_S, PROMOTION_COOLDOWN_S, DECISION_INTERVAL_S and SNAPSHOT_MAX_AGE_S."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from shared.settings import MeshSettings

SERVICE_NAME = "controller"


class ControllerSettings(MeshSettings):
    env_prefixes: ClassVar[tuple[str, ...]] = ("AUTELLIX_", "STARVATION_", "PROMOTION_")
    starvation_beta: float | None = Field(default=5.0, gt=0)  # paper's useful range 3-7
    starvation_min_service_s: float = Field(default=1.0, gt=0)  # denominator floor (one quantum)
    promotion_cooldown_s: float = Field(default=5.0, ge=0)  # no ping-pong between promote and demote
    decision_interval_s: float = Field(default=0.5, gt=0)
    snapshot_max_age_s: float = Field(default=5.0, gt=0)  # an engine silent this long is ignored

    @field_validator("starvation_beta", mode="before")
    @classmethod
    def _none_disables(cls, v: Any) -> Any:
        return None if isinstance(v, str) and v.strip().lower() in ("none", "off", "") else v
