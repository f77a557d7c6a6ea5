"""CPU seconds (user + system) per process, read from /proc through psutil, grouped by role.

Wall-clock rates on a shared machine depend on the neighbours; CPU per call of each process much
less so, which is why every benchmark reports both.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psutil

from runtime.catalog import SERVICES as CATALOG
from runtime.catalog import service_names

SERVICES = service_names()


def stack_role(proc: psutil.Process) -> str | None:
    """Which part of an `autellix up` stack a process is (services by module name, then the servers)."""
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return None
    for spec in CATALOG:
        if spec.module in cmd:
            return spec.name
    if "nats-server" in cmd:
        return "nats"
    if "postgres" in cmd:
        return "postgres"
    return None


def cpu_s(pids: dict[str, int], tree_roles: dict[int, Callable[[psutil.Process], str | None]] | None = None,
          ) -> dict[str, float]:
    """CPU seconds so far: each named pid with its descendants, and each root pid of `tree_roles`
    split over its descendants by the role function (processes without a role are left out)."""
    totals: dict[str, float] = {}

    def add(role: str, proc: psutil.Process) -> None:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended meanwhile
            return
        totals[role] = totals.get(role, 0.0) + t.user + t.system

    for name, pid in pids.items():
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in procs:
            add(name, proc)
    for pid, role_of in (tree_roles or {}).items():
        try:
            procs = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            continue
        for proc in procs:
            role = role_of(proc)
            if role is not None:
                add(role, proc)
    return totals


class CpuWindow:
    """CPU per unit of work over a window: `start()`, do the work, `per_unit_ms(n)`; this process
    itself is counted as `client`."""

    def __init__(self, pids: dict[str, int] | None = None,
                 tree_roles: dict[int, Callable[[psutil.Process], str | None]] | None = None) -> None:
        self.pids = pids or {}
        self.tree_roles = tree_roles or {}
        self._before: dict[str, float] = {}
        self._client_before = 0.0

    def start(self) -> CpuWindow:
        self._before = cpu_s(self.pids, self.tree_roles)
        self._client_before = time.process_time()
        return self

    def per_unit_ms(self, units: float, digits: int = 4) -> dict[str, float]:
        after = cpu_s(self.pids, self.tree_roles)
        client = time.process_time() - self._client_before
        if units <= 0:
            return {}
        out = {role: round((after[role] - self._before.get(role, 0.0)) / units * 1e3, digits) for role in sorted(after)}
        out["client"] = round(client / units * 1e3, digits)
        out["total"] = round(sum(out.values()), digits)
        return out


def load_average() -> float:
    return round(os.getloadavg()[0], 2)
