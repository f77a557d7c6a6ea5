"""Engine backends an agent can run: `lite` (pure Python) or `emulated` (vLLM's scheduler on CPU).

Anti-starvation is off inside the engine: in the mesh the controller decides promotions on
cluster-wide state and every engine applies them from `ProgramPromoted` events (an engine that
promoted on its own would reset a ledger the process table never reset).
"""

from __future__ import annotations

from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import Engine, ProgramDirectory


def make_engine(backend: str, engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory,
                preset: str) -> Engine:
    if backend == "lite":
        from shared.engine.lite import LiteEngine, LiteEngineConfig

        config = LiteEngineConfig(preset=preset, starvation=StarvationConfig(beta=None))
        return LiteEngine(engine_id, policy, directory, config)
    if backend == "emulated":
        try:
            from shared.engine import vllm_adapter
        except ImportError as exc:
            raise ValueError(f"backend 'emulated' needs vLLM (pip install -e '.[vllm]'): {exc}") from None
        return vllm_adapter.make_emulated_engine(engine_id, policy, directory, preset)
    raise ValueError(f"unknown engine backend {backend!r}; valid: lite, emulated")
