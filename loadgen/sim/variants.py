"""Policy variants the simulator compares: a scheduling policy plus, for the paper's baseline,
the engine settings that come with it.

`fcfs-v0` is the paper's baseline, vLLM 0.6.1's default: FCFS, whole prefills scheduled ahead of
decodes (no chunked prefill) and no prefix cache. `fcfs` is an optimized FCFS on the run's engine
settings (by default chunked prefill and prefix caching, as vLLM V1). Every other policy runs on
the run's engine settings too.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.policy import PolicyName


@dataclass(frozen=True)
class PolicyVariant:
    name: str
    policy: PolicyName
    description: str
    batching: str | None = None  # None: the run's setting
    prefix_cache: bool | None = None


VARIANTS: dict[str, PolicyVariant] = {
    v.name: v
    for v in (
        PolicyVariant("fcfs-v0", PolicyName.FCFS,
                      "FCFS, v0 batching, no prefix cache (vLLM 0.6.1 default: the paper's baseline)",
                      batching="v0", prefix_cache=False),
        PolicyVariant("fcfs", PolicyName.FCFS, "FCFS on the run's engine settings (optimized FCFS by default)"),
        PolicyVariant("mlfq", PolicyName.MLFQ, "per-call MLFQ (every new call enters level 0)"),
        PolicyVariant("plas", PolicyName.PLAS, "PLAS: program-level attained service (sum)"),
        PolicyVariant("atlas", PolicyName.ATLAS, "ATLAS: critical-path attained service (max over threads)"),
        PolicyVariant("srpt", PolicyName.SRPT, "SRPT oracle: remaining program service (clairvoyant)"),
        PolicyVariant("serpt", PolicyName.SERPT, "SERPT: expected remaining program service, learned online "
                      "per workload from finished programs (admission order only, no oracle)"),
    )
}
DEFAULT_POLICIES = tuple(VARIANTS)


def parse_variants(text: str) -> tuple[PolicyVariant, ...]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"no policy given; valid policies: {', '.join(VARIANTS)}")
    out = []
    for n in names:
        if n not in VARIANTS:
            raise ValueError(f"unknown policy {n!r}; valid policies: {', '.join(VARIANTS)}")
        if VARIANTS[n] not in out:
            out.append(VARIANTS[n])
    return tuple(out)
