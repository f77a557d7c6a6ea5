"""Settings of the lite engine model."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from shared.core.kv_retention import RetentionConfig
from shared.core.starvation import StarvationConfig
from shared.core.tool_profiles import ToolProfileConfig
from shared.engine.cost_model import DEFAULT_PRESET, get_preset
from shared.engine.program_sched import KV_VICTIM_RULES, SchedulerSettings
from shared.engine.speed_trace import SpeedTrace

_SCHED = SchedulerSettings()  # the scheduling knobs' defaults: the vLLM scheduler class's own


class BatchingMode(StrEnum):
    V1 = "v1"  # vLLM V1: chunked prefill mixed with decodes under one token budget
    V0 = "v0"  # vLLM 0.6.1 default: whole prefills ahead of decodes, a prefill step stalls decodes


class PreemptionMode(StrEnum):
    RECOMPUTE = "recompute"  # vLLM V1: drop the KV (full blocks stay in the prefix cache), recompute later
    SWAP = "swap"  # copy the KV to host memory and back (Autellix: batched swap)
    # vLLM's OffloadingConnector (CPU backend): recompute-style preemption, but every freed full block
    # is also held in a host LRU and loaded back (batched, over PCIe) instead of recomputed
    OFFLOAD = "offload"


def _parse(enum_cls: type[StrEnum], value: str, what: str) -> StrEnum:
    try:
        return enum_cls(str(value).strip().lower())
    except ValueError:
        valid = ", ".join(m.value for m in enum_cls)
        raise ValueError(f"unknown {what} {value!r}; valid: {valid}") from None


@dataclass(frozen=True)
class LiteEngineConfig:
    preset: str = DEFAULT_PRESET
    token_budget: int = 8192  # vLLM max_num_batched_tokens
    max_num_seqs: int = 256  # vLLM max_num_seqs
    block_size: int = 16  # tokens per KV block (vLLM default)
    num_blocks: int | None = None  # override the preset's free KV blocks
    mode: BatchingMode | str = BatchingMode.V1
    prefix_caching: bool = True
    preemption: PreemptionMode | str = PreemptionMode.RECOMPUTE
    batched_swap: bool = False  # one copy per layer/tensor for all of a call's blocks (Autellix)
    swap_space_blocks: int | None = None  # host blocks for swapped or offloaded KV (None: unbounded);
    # swap: a preempted call that does not fit recomputes; offload: the host LRU evicts its oldest
    # scheduling knobs (ProgramScheduleState's, with the same defaults as the vLLM scheduler class):
    # proactive preemption at most every this many steps (anti-thrash quantum); program ledgers
    # re-read at most this often (virtual s; programs whose calls finished here at the next step)
    preemption_interval_steps: int = _SCHED.preemption_interval_steps
    key_refresh_interval_s: float = _SCHED.key_refresh_interval_s
    starvation: StarvationConfig = field(default_factory=StarvationConfig)
    starvation_check_interval_s: float = _SCHED.starvation_check_interval_s
    kv_victim: str = _SCHED.kv_victim  # who KV exhaustion evicts (program_sched.KV_VICTIM_RULES)
    v0_watermark: float = 0.01  # vLLM V0 BlockSpaceManager watermark: admit only above 1% free blocks
    # workflow-aware KV retention (docs/design/kv_retention.md); None: off, plain prefix-cache LRU
    kv_retention: RetentionConfig | None = None
    tool_profiles: ToolProfileConfig = field(default_factory=ToolProfileConfig)
    # the host's speed over time (each step's modeled time times the factor where it starts);
    # None: the cost model's constant speed
    speed_trace: SpeedTrace | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _parse(BatchingMode, self.mode, "batching mode"))
        object.__setattr__(self, "preemption", _parse(PreemptionMode, self.preemption, "preemption mode"))
        get_preset(self.preset)  # unknown preset -> ValueError listing the valid names
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.token_budget < self.max_num_seqs:
            raise ValueError(f"token_budget ({self.token_budget}) must be >= max_num_seqs ({self.max_num_seqs})")
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {self.num_blocks}")
        if self.kv_victim not in KV_VICTIM_RULES:
            raise ValueError(f"unknown kv_victim rule {self.kv_victim!r}; valid: {', '.join(KV_VICTIM_RULES)}")
        if self.preemption_interval_steps < 1:
            raise ValueError(f"preemption_interval_steps must be >= 1, got {self.preemption_interval_steps}")
        if self.key_refresh_interval_s < 0 or self.starvation_check_interval_s < 0:
            raise ValueError("refresh and starvation check intervals must be >= 0")
        if self.kv_retention is not None and not self.prefix_caching:
            raise ValueError("kv_retention needs prefix_caching (retained blocks are found by their hash)")
        if self.swap_space_blocks is not None and self.swap_space_blocks < 0:
            raise ValueError(f"swap_space_blocks must be >= 0, got {self.swap_space_blocks}")
        if self.preemption is PreemptionMode.OFFLOAD and self.swap_space_blocks == 0:
            raise ValueError("preemption 'offload' needs swap_space_blocks >= 1 (or None: unbounded)")
        if self.preemption is PreemptionMode.OFFLOAD and not self.prefix_caching:
            raise ValueError("preemption 'offload' needs prefix_caching (host blocks are found by their hash)")
        if not 0 <= self.v0_watermark < 1:
            raise ValueError(f"v0_watermark must be in [0, 1), got {self.v0_watermark}")
