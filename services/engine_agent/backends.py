"""Engine backends an agent can run: `lite` (pure Python) or `emulated` (vLLM's scheduler on CPU).

Anti-starvation is off inside the engine: in the mesh the controller decides promotions on
cluster-wide state and every engine applies them from `ProgramPromoted` events (an engine that
promoted on its own would reset a ledger the process table never reset).
"""

from __future__ import annotations

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import Engine, ProgramDirectory


def make_engine(backend: str, engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory,
                preset: str, max_num_seqs: int | None = None, num_blocks: int | None = None,
                kv_retention: RetentionConfig | None = None) -> Engine:
    if backend == "lite":
        from shared.engine.lite import LiteEngine, LiteEngineConfig

        limits = {"max_num_seqs": max_num_seqs} if max_num_seqs else {}
        config = LiteEngineConfig(preset=preset, starvation=StarvationConfig(beta=None), num_blocks=num_blocks,
                                  kv_retention=kv_retention, **limits)
        return LiteEngine(engine_id, policy, directory, config)
    if backend == "emulated":
        from shared.engine.vllm_emulated import EmulatedVllmEngine  # imports vLLM only when built

        limits = {"max_num_seqs": max_num_seqs} if max_num_seqs else {}
        try:
            return EmulatedVllmEngine(engine_id, policy, directory, preset=preset,
                                      starvation=StarvationConfig(beta=None), num_kv_blocks=num_blocks,
                                      kv_retention=kv_retention, **limits)
        except ImportError as exc:
            raise ValueError(f"backend 'emulated' needs vLLM 0.32 (make setup): {exc}") from None
    raise ValueError(f"unknown engine backend {backend!r}; valid: lite, emulated")
