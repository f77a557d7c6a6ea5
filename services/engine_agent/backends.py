"""Engine backends an agent can run: `lite` (pure Python) or `emulated` (vLLM's scheduler on CPU)."""

from __future__ import annotations

from shared.core.policy import SchedulingPolicy
from shared.engine.api import Engine, ProgramDirectory


def make_engine(backend: str, engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory) -> Engine:
    if backend == "lite":
        from shared.engine.lite import LiteEngine

        return LiteEngine(engine_id=engine_id, policy=policy, directory=directory)
    if backend == "emulated":
        try:
            from shared.engine.vllm_adapter import EmulatedVllmEngine
        except ImportError as exc:
            raise ValueError(f"backend 'emulated' needs the vllm extra (pip install -e '.[vllm]'): {exc}") from None
        return EmulatedVllmEngine(engine_id=engine_id, policy=policy, directory=directory)
    raise ValueError(f"unknown engine backend {backend!r}; valid: lite, emulated")
