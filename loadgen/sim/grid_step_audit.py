"""Find reported gains over FCFS that are one step of the rate search's grid.

A policy's max rate that is its last good grid point, when that point is FCFS's first bad one,
says only that the policy's crossing lies one grid step above FCFS's: the true gain is anywhere
from just above 1x to two steps. This lists every such gain in `autellix sim` results files
(headline crossing: the doubled search's when it ran), with the step's size.

    python -m loadgen.sim.grid_step_audit docs/results/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def headline(policy: dict, label: str) -> dict:
    at = policy["max_rate_at_slos"][label]
    return at["doubled"] or at["crossing"]


def one_step_gains(result: dict) -> list[dict]:
    policies = result.get("policies") or {}
    if "fcfs" not in policies or "max_rate_at_slos" not in policies["fcfs"]:
        return []
    out = []
    for label in policies["fcfs"]["max_rate_at_slos"]:
        fcfs = headline(policies["fcfs"], label)
        for name, policy in policies.items():
            if name == "fcfs" or label not in policy.get("max_rate_at_slos", {}):
                continue
            mine = headline(policy, label)
            lo, fcfs_lo, fcfs_hi = mine["last_good_rate"], fcfs["last_good_rate"], fcfs["first_bad_rate"]
            if not (lo and fcfs_lo and fcfs_hi) or mine["max_rate"] <= fcfs["max_rate"]:
                continue
            if abs(lo - fcfs_hi) <= 1e-9 * fcfs_hi:  # its last good point is FCFS's first bad one
                out.append({"slo": label, "policy": name, "gain": mine["max_rate"] / fcfs["max_rate"],
                            "grid_step": fcfs_hi / fcfs_lo, "fcfs_bracket": [fcfs_lo, fcfs_hi],
                            "policy_bracket": [lo, mine["first_bad_rate"]]})
    return out


def main(paths: list[str]) -> None:
    for path in sorted(paths):
        try:
            result = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(result, dict):
            continue
        for g in one_step_gains(result):
            hi = g["policy_bracket"][1]
            print(f"{path}: {g['policy']} {g['gain']:.3f}x over fcfs at {g['slo']} = one grid step "
                  f"({g['grid_step']:.3f}x); fcfs crosses in [{g['fcfs_bracket'][0]:.4g}, {g['fcfs_bracket'][1]:.4g}), "
                  f"{g['policy']} in [{g['policy_bracket'][0]:.4g}, {'-' if hi is None else f'{hi:.4g}'})")


if __name__ == "__main__":
    main(sys.argv[1:])
