"""Which `autellix sim` options each mode takes, so none is accepted and then silently ignored.

Two modes: the throughput sweep (max rate at an SLO per policy) and the KV mode (one rate, KV
policies x routers x fairness; selected by `--kv-policy`, `--belady`, `--fairness` or `affinity` /
several routers in `--router`). An option that only one mode applies is refused in the other with
a message naming it and the mode that takes it. Options whose argparse default is None (or False)
count as given when they are not.
"""

from __future__ import annotations

import argparse

# dest -> the flag as a user types it
SWEEP_ONLY = {
    "sweep": "--sweep",
    "slo": "--slo",
    "slo_multiple": "--slo-multiple",
    "prefix_cache": "--prefix-cache/--no-prefix-cache",
    "bisect_steps": "--bisect-steps",
    "max_programs": "--max-programs",
    "no_doubling_check": "--no-doubling-check",
    "quick": "--quick",
    "arrivals": "--arrivals",
    "regimes": "--regimes",
    "regime_programs": "--regime-programs",
    "host_kv_blocks": "--host-kv-blocks",
    "kv_victim": "--kv-victim",
}
KV_ONLY = {
    "slo_task_multiple": "--slo-task-multiple",
}
KV_HINTS = {  # what to use in the KV mode instead
    "prefix_cache": "the KV mode sets the prefix cache per --kv-policy (lru: none)",
    "slo": "the KV mode's SLO is per tenant class: --slo-task-multiple",
    "slo_multiple": "the KV mode's SLO is per tenant class: --slo-task-multiple",
    "sweep": "the KV mode runs at one rate: --rates R",
    "arrivals": "the KV mode runs steady Poisson arrivals at --rates R",
}


def given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest, None)
    if dest == "prefix_cache":  # --no-prefix-cache gives False: given too
        return value is not None
    return value is not None and value is not False


def refuse_foreign_options(args: argparse.Namespace, kv_mode: bool) -> None:
    """ValueError naming every given option the selected mode does not apply."""
    foreign = SWEEP_ONLY if kv_mode else KV_ONLY
    bad = [dest for dest in foreign if given(args, dest)]
    if not bad:
        return
    flags = ", ".join(foreign[d] for d in bad)
    if kv_mode:
        hints = "; ".join(dict.fromkeys(KV_HINTS[d] for d in bad if d in KV_HINTS))
        raise ValueError(f"{flags}: throughput-sweep option(s), not applied in the KV mode (selected by "
                         f"--kv-policy, --belady, --fairness or --router with affinity or several routers)"
                         + (f"; {hints}" if hints else ""))
    raise ValueError(f"{flags}: KV-mode option(s), not applied in the throughput sweep (add --kv-policy, "
                     f"--fairness or --router affinity to select the KV mode)")
