"""Policy variants the simulator compares: a scheduling policy plus, for the paper's baseline,
the engine settings that come with it.

`fcfs-v0` is the paper's baseline, vLLM 0.6.1's default: FCFS, whole prefills scheduled ahead of
decodes (no chunked prefill) and no prefix cache. `fcfs` is an optimized FCFS on the run's engine
settings (by default chunked prefill and prefix caching, as vLLM V1). Every other policy runs on
the run's engine settings too.

A policy that reads learned sizes (SERPT, Gittins) may be named with `+hints` (`serpt+hints`, or
`serpt+hints:SIGMA`): its simulated clients then hint their programs' remaining calls, with a
log-normal error of log-sigma SIGMA per program (0 by default: the plan is known exactly), checked
before they are trusted (loadgen/sim/size_hints.py).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from shared.core.policies import registry
from shared.core.policy import PolicyName, parse_policy


@dataclass(frozen=True)
class PolicyVariant:
    name: str
    policy: PolicyName
    description: str
    batching: str | None = None  # None: the run's setting
    prefix_cache: bool | None = None
    hint_sigma: float | None = None  # clients' remaining-calls hints and their error; None: no hints


_BASELINE = PolicyVariant("fcfs-v0", PolicyName.FCFS,
                          "FCFS, v0 batching, no prefix cache (vLLM 0.6.1 default: the paper's baseline)",
                          batching="v0", prefix_cache=False)
# the baseline, then every registered policy on the run's settings (a new policy needs no line here)
VARIANTS: dict[str, PolicyVariant] = {
    v.name: v for v in (_BASELINE, *(PolicyVariant(n, parse_policy(n), registry.get(n).description)
                                     for n in registry.names()))
}
DEFAULT_POLICIES = tuple(VARIANTS)
HINTS_SUFFIX = "+hints"


def _with_hints(name: str) -> PolicyVariant:
    base_name, _, rest = name.partition(HINTS_SUFFIX)
    base = VARIANTS.get(base_name)
    if base is None:
        raise ValueError(f"unknown policy {base_name!r}; valid policies: {', '.join(VARIANTS)}")
    if "expected_remaining_s" not in registry.get(base_name).inputs:
        readers = [n for n in registry.names() if "expected_remaining_s" in registry.get(n).inputs]
        raise ValueError(f"{base_name} reads no program sizes, so it cannot take client hints; "
                         f"policies that can: {', '.join(readers)}")
    sigma_text = rest[1:] if rest.startswith(":") else rest
    if rest and not rest.startswith(":"):
        raise ValueError(f"bad policy {name!r}: write {base_name}+hints or {base_name}+hints:SIGMA")
    try:
        sigma = float(sigma_text) if sigma_text else 0.0
    except ValueError:
        raise ValueError(f"bad hint error in {name!r}: {sigma_text!r} is not a number") from None
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"bad hint error in {name!r}: the log-sigma must be finite and >= 0")
    return dataclasses.replace(base, name=f"{base_name}{HINTS_SUFFIX}:{sigma:g}", hint_sigma=sigma,
                               description=f"{base.description}; clients hint remaining calls "
                                           f"(log-sigma {sigma:g} error), trusted once checked")


def variant_named(name: str) -> PolicyVariant:
    """The variant a name stands for (a registered policy, fcfs-v0, or one with hints)."""
    if HINTS_SUFFIX in name:
        return _with_hints(name)
    if name in VARIANTS:
        return VARIANTS[name]
    raise ValueError(f"unknown policy {name!r}; valid policies: {', '.join(VARIANTS)} "
                     f"(a policy that reads sizes may add {HINTS_SUFFIX}[:SIGMA])")


def parse_variants(text: str) -> tuple[PolicyVariant, ...]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"no policy given; valid policies: {', '.join(VARIANTS)}")
    out = []
    for n in names:
        variant = variant_named(n)
        if variant not in out:
            out.append(variant)
    return tuple(out)


def live_variant(name: str) -> PolicyVariant:
    """A variant a live stack can run: no oracle, no engine settings of its own, and hints only
    exact ones (live clients send their programs' unfinished calls; an error is a simulator knob)."""
    variant = variant_named(name)
    if "oracle_remaining_s" in registry.get(variant.policy.value).inputs:
        live = [n for n in registry.names() if "oracle_remaining_s" not in registry.get(n).inputs]
        raise ValueError(f"{name} cannot run live (clairvoyant: simulation only); live policies: {', '.join(live)}")
    if variant.batching is not None or variant.prefix_cache is not None:
        raise ValueError(f"{name} sets engine settings the live stack does not take; use fcfs")
    if variant.hint_sigma not in (None, 0.0):
        raise ValueError(f"{name}: live clients hint exactly; an error (:SIGMA) is for `autellix sim` only")
    return variant
