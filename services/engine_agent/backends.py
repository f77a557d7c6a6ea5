"""The engine an agent steps in its process: `lite` (pure Python) or `emulated` (vLLM's scheduler
on CPU), built by the one engine factory (`shared/engine/registry.py`).

Anti-starvation is off inside the engine: in the mesh the controller decides promotions on
cluster-wide state and every engine applies them from `ProgramPromoted` events (an engine that
promoted on its own would reset a ledger the process table never reset).
"""

from __future__ import annotations

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import Engine, ProgramDirectory
from shared.engine.registry import EngineSpec, build_engine


def make_engine(backend: str, engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory,
                preset: str, max_num_seqs: int | None = None, num_blocks: int | None = None,
                kv_retention: RetentionConfig | None = None) -> Engine:
    limits = {"max_num_seqs": max_num_seqs} if max_num_seqs else {}
    spec = EngineSpec(preset=preset, starvation=StarvationConfig(beta=None), num_blocks=num_blocks,
                      kv_retention=kv_retention, **limits)
    return build_engine(backend, engine_id, policy, directory, spec)
