"""Engine choice for a call: KV locality for long prompts, least-loaded or round-robin otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class RouterName(StrEnum):
    LOCALITY = "locality"  # the paper's rule
    LEAST_LOADED = "least-loaded"
    ROUND_ROBIN = "round-robin"


def parse_router(name: str) -> RouterName:
    try:
        return RouterName(name.strip().lower())
    except ValueError:
        valid = ", ".join(r.value for r in RouterName)
        raise ValueError(f"unknown router {name!r}; valid routers: {valid}") from None


@dataclass(frozen=True)
class RouteDecision:
    engine_id: str
    reason: str


def choose_engine(
    router: RouterName,
    engine_loads: Mapping[str, float],
    prompt_tokens: int,
    primary_engine: str | None,
    round_robin_index: int,
    locality_threshold_tokens: int = 2048,
) -> RouteDecision:
    """Pick an engine. `engine_loads` holds the live engines and a load figure (queued work).

    Ties in load go to the lowest engine id so decisions are deterministic.
    """
    if not engine_loads:
        raise ValueError("no live engine to route to")
    engines = sorted(engine_loads)
    if router is RouterName.ROUND_ROBIN:
        return RouteDecision(engines[round_robin_index % len(engines)], "round-robin")
    if (router is RouterName.LOCALITY and primary_engine in engine_loads
            and prompt_tokens >= locality_threshold_tokens):
        return RouteDecision(primary_engine, f"locality: prompt {prompt_tokens} >= {locality_threshold_tokens}")
    best = min(engines, key=lambda e: (engine_loads[e], e))
    return RouteDecision(best, f"least-loaded: load {engine_loads[best]:.3g}")
