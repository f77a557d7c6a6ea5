"""Engine settings of a run and the factory that builds its engines (lite or emulated vLLM)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from loadgen.sim.variants import PolicyVariant
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory, Engine

ENGINE_KINDS = ("lite", "emulated")
BATCHING_MODES = ("v0", "v1")
PREEMPTION_MODES = ("recompute", "swap")
DEFAULT_BETA = StarvationConfig().beta


@dataclass(frozen=True)
class EngineOptions:
    kind: str = "lite"
    preset: str = "llama3.1-8b-a100"
    batching: str = "v1"
    prefix_cache: bool = True
    preemption: str = "recompute"
    beta: float | None = DEFAULT_BETA

    def __post_init__(self) -> None:
        if self.kind not in ENGINE_KINDS:
            raise ValueError(f"unknown engine {self.kind!r}; valid engines: {', '.join(ENGINE_KINDS)}")
        if self.batching not in BATCHING_MODES:
            raise ValueError(f"unknown batching {self.batching!r}; valid: {', '.join(BATCHING_MODES)}")
        if self.preemption not in PREEMPTION_MODES:
            raise ValueError(f"unknown preemption {self.preemption!r}; valid: {', '.join(PREEMPTION_MODES)}")
        if self.beta is not None and not self.beta > 0:
            raise ValueError(f"beta must be positive or 'none', got {self.beta}")

    def for_variant(self, variant: PolicyVariant) -> EngineOptions:
        """The settings a policy variant runs on (fcfs-v0 carries its own)."""
        return EngineOptions(
            kind=self.kind, preset=self.preset,
            batching=variant.batching or self.batching,
            prefix_cache=self.prefix_cache if variant.prefix_cache is None else variant.prefix_cache,
            preemption=self.preemption, beta=self.beta,
        )

    def to_json(self) -> dict:
        return asdict(self)


def build_engines(options: EngineOptions, policy: SchedulingPolicy, directory: DictProgramDirectory,
                  num_engines: int) -> list[Engine]:
    raise NotImplementedError("lite engine not wired yet")
