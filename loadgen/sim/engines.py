"""Engine settings of a run and the factory that builds its engines (lite or emulated vLLM)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from loadgen.sim.variants import PolicyVariant
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine import registry
from shared.engine.api import DictProgramDirectory, Engine
from shared.engine.program_sched import DEFAULT_KV_VICTIM, KV_VICTIM_RULES

BATCHING_MODES = ("v0", "v1")
PREEMPTION_MODES = ("recompute", "swap", "offload")
DEFAULT_BETA = StarvationConfig().beta


@dataclass(frozen=True)
class EngineOptions:
    kind: str = "lite"
    preset: str = "llama3.1-8b-a100"
    batching: str = "v1"
    prefix_cache: bool = True
    preemption: str = "recompute"
    beta: float | None = DEFAULT_BETA
    max_num_seqs: int = 256  # running calls per engine (vLLM's max_num_seqs)
    num_blocks: int | None = None  # KV blocks per engine; None: the preset's
    # the CPU tier: host KV blocks of preemption "swap" (lite: preempted KV) or "offload" (vLLM's
    # OffloadingConnector: preempted and evicted KV; lite models it, emulated runs it and needs a
    # size, its cpu_bytes_to_use); None: unbounded on lite. batched_swap: swap's copies (offload's
    # are always batched, as vLLM's offload worker's)
    host_kv_blocks: int | None = None
    batched_swap: bool = False
    kv_victim: str = DEFAULT_KV_VICTIM  # who KV exhaustion evicts (program_sched.KV_VICTIM_RULES)

    def __post_init__(self) -> None:
        if not registry.is_simulated(self.kind):
            raise ValueError(f"unknown engine {self.kind!r}; valid engines: {', '.join(registry.simulated_backends())}")
        if self.batching not in BATCHING_MODES:
            raise ValueError(f"unknown batching {self.batching!r}; valid: {', '.join(BATCHING_MODES)}")
        if self.preemption not in PREEMPTION_MODES:
            raise ValueError(f"unknown preemption {self.preemption!r}; valid: {', '.join(PREEMPTION_MODES)}")
        if self.beta is not None and not self.beta > 0:
            raise ValueError(f"beta must be positive or 'none', got {self.beta}")
        if self.max_num_seqs < 1:
            raise ValueError(f"--max-num-seqs must be >= 1, got {self.max_num_seqs}")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ValueError(f"--num-blocks must be >= 1, got {self.num_blocks}")
        if self.host_kv_blocks is not None and self.host_kv_blocks < 1:
            raise ValueError(f"host_kv_blocks must be >= 1, got {self.host_kv_blocks}")
        if self.preemption == "recompute" and self.host_kv_blocks is not None:
            raise ValueError("host_kv_blocks (--host-kv-blocks) sizes the CPU tier: it needs preemption 'swap' or 'offload'")
        if self.kv_victim not in KV_VICTIM_RULES:
            raise ValueError(f"unknown --kv-victim {self.kv_victim!r}; valid: {', '.join(KV_VICTIM_RULES)}")
        if self.preemption != "swap" and self.batched_swap:
            raise ValueError("batched_swap applies to preemption 'swap' (offload always batches)")

    def for_variant(self, variant: PolicyVariant) -> EngineOptions:
        """The settings a policy variant runs on (fcfs-v0 carries its own)."""
        return EngineOptions(
            kind=self.kind, preset=self.preset,
            batching=variant.batching or self.batching,
            prefix_cache=self.prefix_cache if variant.prefix_cache is None else variant.prefix_cache,
            preemption=self.preemption, beta=self.beta, max_num_seqs=self.max_num_seqs,
            num_blocks=self.num_blocks, host_kv_blocks=self.host_kv_blocks, batched_swap=self.batched_swap,
            kv_victim=self.kv_victim,
        )

    def to_json(self) -> dict:
        return asdict(self)

    def controller_starvation(self) -> StarvationConfig:
        """`beta` is the controller's (`SimConfig.starvation`): the engines never promote locally,
        as production's do not (its engine agents run with beta=None)."""
        return StarvationConfig(beta=self.beta)

    def spec(self) -> registry.EngineSpec:
        return registry.EngineSpec(
            preset=self.preset, starvation=StarvationConfig(beta=None), batching=self.batching,
            prefix_caching=self.prefix_cache, preemption=self.preemption, max_num_seqs=self.max_num_seqs,
            num_blocks=self.num_blocks, host_kv_blocks=self.host_kv_blocks, batched_swap=self.batched_swap,
            kv_victim=self.kv_victim)


def check_available(options: EngineOptions) -> None:
    """Fail early, with a clear message, when the chosen engine cannot be built here."""
    if options.kind != "emulated":
        return
    if options.preemption == "swap":
        raise ValueError("the emulated engine (vLLM's scheduler) has no swap; its CPU tier is vLLM's "
                         "OffloadingConnector: use preemption 'offload' (or --engine lite)")
    if options.preemption == "offload" and options.host_kv_blocks is None:
        raise ValueError("the emulated engine's CPU tier is vLLM's OffloadingConnector, which needs a size: "
                         "set host_kv_blocks")
    try:
        import shared.engine.vllm_adapter  # noqa: F401  (imports vLLM: is it installed?)
    except ImportError:
        raise ValueError("--engine emulated needs vLLM 0.32 (make setup); "
                         "use --engine lite without it") from None


def build_engines(options: EngineOptions, policy: SchedulingPolicy, directory: DictProgramDirectory,
                  num_engines: int) -> list[Engine]:
    """Engines e0..e{N-1}, all reading and promoting through the one shared process table."""
    check_available(options)
    return registry.build_engines(options.kind, num_engines, policy, directory, options.spec())
