"""Anti-starvation: promote a program whose wait/service ratio reaches beta."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StarvationConfig:
    """beta = None disables anti-starvation. The paper's useful range is 3-7.

    min_service_s floors the denominator so a program that has received almost no service is not
    promoted for waiting a few milliseconds (it is on level 0 already).
    """

    beta: float | None = 5.0
    min_service_s: float = 1.0

    def __post_init__(self) -> None:
        if self.beta is not None and not self.beta > 0:
            raise ValueError(f"beta must be > 0 or None, got {self.beta}")


def starvation_ratio(program_wait_s: float, program_service_s: float, call_wait_s: float,
                     call_service_s: float, min_service_s: float) -> float:
    """(W_p + w_call) / max(S_p + t_call, floor)."""
    return (program_wait_s + call_wait_s) / max(program_service_s + call_service_s, min_service_s)


def should_promote(cfg: StarvationConfig, program_wait_s: float, program_service_s: float,
                   call_wait_s: float, call_service_s: float) -> bool:
    if cfg.beta is None:
        return False
    ratio = starvation_ratio(program_wait_s, program_service_s, call_wait_s, call_service_s, cfg.min_service_s)
    return ratio >= cfg.beta
