"""What CPU per call predicts for a bigger host: a pure function of the measured costs.

Two bounds, the lower wins:
- cores: N cores carry at most N / (CPU-seconds per call summed over every process of the chain);
- one process: a Python service is one thread, so its instances together carry at most
  instances / (its CPU-seconds per call), however many cores there are (nats-server and
  PostgreSQL use threads or processes of their own, so they have no such cap).
The load client is left out: on a real host it is somewhere else.
"""

from __future__ import annotations

SINGLE_THREADED = ("session_api", "router", "engine_agent", "process_table", "controller")
NOT_SERVING = ("client", "total")


def predict(cpu_ms_per_call: dict[str, float], instances: dict[str, int], cores: int) -> dict:
    """{"calls_per_s", "bound_by"} for `cores` cores; None when no cost was measured."""
    serving = {role: ms for role, ms in cpu_ms_per_call.items() if role not in NOT_SERVING and ms and ms > 0}
    if not serving or cores < 1:
        return {"calls_per_s": None, "bound_by": None}
    bounds = {"cores": cores / (sum(serving.values()) / 1e3)}
    for role, ms in serving.items():
        if role in SINGLE_THREADED:
            bounds[role] = instances.get(role, 1) / (ms / 1e3)
    bound_by = min(bounds, key=bounds.get)
    return {"calls_per_s": round(bounds[bound_by], 1), "bound_by": bound_by}
