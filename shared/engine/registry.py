"""The one engine factory: every simulated backend by name, built from one `EngineSpec`.

    engine = build_engine("lite", "e0", policy, directory, EngineSpec(preset="llama3.1-8b-a100"))

The engine agent (`services/engine_agent/backends.py`), the simulator (`loadgen/sim/engines.py`)
and the KV experiments all build here, so a setting means the same on every path. A new simulated
backend is a builder function and one row in `BACKENDS`: every place that names, validates or
lists backends (settings, `autellix up`, `autellix sim`, the API, metrics) reads them from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import Engine, ProgramDirectory
from shared.engine.cost_model import DEFAULT_PRESET
from shared.engine.program_sched import DEFAULT_KV_VICTIM


@dataclass(frozen=True)
class EngineSpec:
    """What an engine is built with; the defaults are vLLM's (V1 batching, prefix caching, recompute)."""

    preset: str = DEFAULT_PRESET
    starvation: StarvationConfig = field(default_factory=StarvationConfig)  # beta=None: no local promotion
    batching: str = "v1"  # v1: chunked prefill; v0: prefill-first
    prefix_caching: bool = True
    preemption: str = "recompute"  # or "swap" (lite) / "offload" (vLLM's OffloadingConnector): a host KV tier
    max_num_seqs: int = 256
    num_blocks: int | None = None  # KV blocks; None: the preset's
    kv_retention: RetentionConfig | None = None  # workflow-aware retention; None: plain prefix LRU
    host_kv_blocks: int | None = None  # the host tier's size (lite: None is unbounded)
    batched_swap: bool = False  # lite: one copy for all of a call's blocks
    kv_victim: str = DEFAULT_KV_VICTIM  # who KV exhaustion evicts (program_sched.KV_VICTIM_RULES)


Builder = Callable[[str, SchedulingPolicy, ProgramDirectory, EngineSpec], Engine]


def _lite(engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory, spec: EngineSpec) -> Engine:
    from shared.engine.lite import LiteEngine, LiteEngineConfig

    config = LiteEngineConfig(
        preset=spec.preset, mode=spec.batching, prefix_caching=spec.prefix_caching, preemption=spec.preemption,
        starvation=spec.starvation, max_num_seqs=spec.max_num_seqs, num_blocks=spec.num_blocks,
        kv_retention=spec.kv_retention, swap_space_blocks=spec.host_kv_blocks, batched_swap=spec.batched_swap,
        kv_victim=spec.kv_victim)
    return LiteEngine(engine_id, policy, directory, config)


def _emulated(engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory, spec: EngineSpec) -> Engine:
    try:
        from shared.engine.vllm_emulated import EmulatedVllmEngine  # imports vLLM only when built
    except ImportError as exc:
        raise ValueError(f"backend 'emulated' needs vLLM 0.32 (make setup): {exc}") from None
    # vLLM's CPU tier is its OffloadingConnector (preemption "offload"; vLLM V1 has no swap)
    cpu_tier = {"cpu_tier_blocks": spec.host_kv_blocks} if spec.preemption == "offload" else {}
    return EmulatedVllmEngine(
        engine_id, policy, directory, preset=spec.preset, starvation=spec.starvation,
        chunked_prefill=spec.batching == "v1", prefix_caching=spec.prefix_caching,
        max_num_seqs=spec.max_num_seqs, num_kv_blocks=spec.num_blocks, kv_retention=spec.kv_retention,
        kv_victim=spec.kv_victim, **cpu_tier)


BACKENDS: dict[str, Builder] = {"lite": _lite, "emulated": _emulated}
# engines in their own process or server, each started by its agent module (services/engine_agent)
REAL_BACKENDS = ("vllm", "upstream")


def simulated_backends() -> tuple[str, ...]:
    """The engines that step inside the agent's process: every row of `BACKENDS`."""
    return tuple(BACKENDS)


def all_backends() -> tuple[str, ...]:
    return (*BACKENDS, *REAL_BACKENDS)


def is_simulated(backend: str) -> bool:
    return backend in BACKENDS


def build_engine(backend: str, engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory,
                 spec: EngineSpec) -> Engine:
    builder = BACKENDS.get(backend)
    if builder is None:
        raise ValueError(f"unknown engine backend {backend!r}; valid: {', '.join(BACKENDS)}")
    return builder(engine_id, policy, directory, spec)


def build_engines(backend: str, num_engines: int, policy: SchedulingPolicy, directory: ProgramDirectory,
                  spec: EngineSpec) -> list[Engine]:
    """Engines e0..e{N-1} sharing one directory (a simulator's cluster)."""
    return [build_engine(backend, f"e{i}", policy, directory, spec) for i in range(num_engines)]
