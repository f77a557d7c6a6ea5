"""Agent Fair Share (SAGA Eq. 8): tenant urgency on task completion, composed with ATLAS.

    AFS_i = sum over tenant i's open tasks t of  remaining_work(t) / max(deadline(t) - now, eps)

A task's deadline is its arrival plus its tenant's SLO. Remaining work is estimated without
clairvoyance: the observed mean work of finished tasks of the same (tenant, task class) -- else the
task class across tenants, else a prior -- minus the task's attained service, floored at
`remaining_floor_fraction` of that mean (a task that outran its class mean is not "done").

Tenant order (lower rank = capacity first):
    1. under-entitled tenants before over-entitled ones: a tenant whose recent share of service
       exceeds its weight's share (w_i / sum of active tenants' w) goes behind (the restoring drift
       of SAGA's Lyapunov bound: an underserved tenant gets more, an overserved one less);
    2. then higher AFS_i / w_i first: AFS is a rate (work seconds per second) and w_i buys a share
       of capacity, so AFS_i / w_i is the demand in units of entitlement; dividing keeps a large
       weight from also buying urgency (weight already buys entitlement in step 1);
    3. then tenant id (determinism).

The order alone is no lever when nothing queues (every ready call is admitted into the batch at
once): then a light tenant loses time to longer steps, not to a queue. `admission_holds` gives AFS
the capacity lever of SAGA's per-epoch allocation: for one epoch the controller holds the new calls
of over-entitled tenants while a tenant ranked ahead of them has a task at risk (its estimated
remaining work exceeds the time left to its deadline, which has not passed yet). Calls already
running keep running; held calls are submitted at the first epoch without a hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from shared.lru import LRU

DEFAULT_TASK_CLASS = "default"


@dataclass(frozen=True)
class FairnessConfig:
    deadline_epsilon_s: float = 0.01  # deadline - now is floored here (overdue tasks: most urgent)
    remaining_floor_fraction: float = 0.1  # of the class mean work
    prior_task_work_s: float = 10.0  # mean work before any task of the class finished (a prior)
    alpha: float = 0.1  # EMA weight of a finished task's work in its class mean
    max_classes: int = 1024  # (tenant, task class) means kept, LRU-bounded
    share_tolerance: float = 0.05  # a tenant is over-entitled above (1 + tol) x its weight's share

    def __post_init__(self) -> None:
        if not (self.deadline_epsilon_s > 0 and self.prior_task_work_s > 0 and 0 < self.alpha <= 1):
            raise ValueError("deadline_epsilon_s and prior_task_work_s must be > 0, alpha in (0, 1]")
        if not 0 <= self.remaining_floor_fraction <= 1 or self.max_classes < 1 or self.share_tolerance < 0:
            raise ValueError("remaining_floor_fraction in [0, 1], max_classes >= 1, share_tolerance >= 0")


@dataclass(frozen=True)
class TenantSpec:
    tenant_id: str
    weight: float = 1.0
    slo_s: float = 60.0  # a task's deadline = its arrival + slo_s

    def __post_init__(self) -> None:
        if not (self.weight > 0 and self.slo_s > 0):
            raise ValueError(f"tenant {self.tenant_id}: weight and slo_s must be > 0")


@dataclass(frozen=True)
class OpenTask:
    task_id: str
    tenant_id: str
    arrival_s: float
    attained_service_s: float  # engine time its calls received so far
    task_class: str = DEFAULT_TASK_CLASS


class WorkEstimator:
    """Mean work of finished tasks per (tenant, class) and per class, as EMAs (bounded, LRU)."""

    def __init__(self, cfg: FairnessConfig | None = None) -> None:
        self.cfg = cfg or FairnessConfig()
        self._means: LRU[tuple[str, str], float] = LRU(self.cfg.max_classes)  # tenant "" = all tenants

    def observe_completion(self, tenant_id: str, task_class: str, work_s: float) -> None:
        if not (work_s >= 0 and math.isfinite(work_s)):
            return  # nothing sane to learn
        for key in ((tenant_id, task_class), ("", task_class)):
            old = self._means.get(key)
            self._means.put(key, work_s if old is None else old + self.cfg.alpha * (work_s - old))

    def mean_work_s(self, tenant_id: str, task_class: str) -> float:
        for key in ((tenant_id, task_class), ("", task_class)):
            if key in self._means:
                return self._means[key]
        return self.cfg.prior_task_work_s

    def remaining_work_s(self, task: OpenTask) -> float:
        mean = self.mean_work_s(task.tenant_id, task.task_class)
        return max(mean - max(task.attained_service_s, 0.0), self.cfg.remaining_floor_fraction * mean)


def task_urgency(remaining_work_s: float, deadline_s: float, now_s: float, cfg: FairnessConfig) -> tuple[float, bool]:
    """(remaining / max(deadline - now, eps), overdue)."""
    slack_s = deadline_s - now_s
    return max(remaining_work_s, 0.0) / max(slack_s, cfg.deadline_epsilon_s), slack_s <= 0


@dataclass(frozen=True)
class TenantShare:
    tenant_id: str
    afs: float  # AFS_i
    afs_per_weight: float  # AFS_i / w_i
    over_entitled: bool  # recent service share above its weight's share
    open_tasks: int
    overdue_tasks: int
    rank: int  # 0 = capacity first
    reason: str


def tenant_afs(tasks: Iterable[OpenTask], tenant: TenantSpec, now_s: float, est: WorkEstimator) -> tuple[float, int, int]:
    """(AFS_i, open tasks, overdue tasks) for one tenant's open tasks."""
    afs, n, overdue = 0.0, 0, 0
    for t in tasks:
        urgency, late = task_urgency(est.remaining_work_s(t), t.arrival_s + tenant.slo_s, now_s, est.cfg)
        afs += urgency
        n += 1
        overdue += late
    return afs, n, overdue


def at_risk_tasks(tasks: Iterable[OpenTask], tenant: TenantSpec, now_s: float, est: WorkEstimator) -> int:
    """Open tasks that cannot finish by their deadline at one unit of service per second unless
    they get capacity now: remaining work > time left > 0 (overdue tasks are past saving)."""
    n = 0
    for t in tasks:
        slack_s = t.arrival_s + tenant.slo_s - now_s
        n += 0 < slack_s < est.remaining_work_s(t)
    return n


def admission_holds(shares: Sequence[TenantShare], at_risk: Mapping[str, int]) -> frozenset[str]:
    """Tenants whose new calls wait at the controller this epoch: each over-entitled tenant ranked
    behind an under-entitled tenant that has a task at risk. The top-ranked tenant is never held,
    so at least one tenant always submits."""
    holds = set()
    protected = False  # an under-entitled tenant ahead in the order has a task at risk
    for s in sorted(shares, key=lambda x: x.rank):
        if protected and s.over_entitled:
            holds.add(s.tenant_id)
        if not s.over_entitled and at_risk.get(s.tenant_id, 0) > 0:
            protected = True
    return frozenset(holds)


def rank_tenants(tenants: Sequence[TenantSpec], open_tasks: Iterable[OpenTask], now_s: float,
                 est: WorkEstimator, recent_service_s: Mapping[str, float] | None = None) -> list[TenantShare]:
    """Tenants with open tasks, in capacity order (see the module doc). Tasks of unknown tenants
    are ranked under a default TenantSpec (weight 1, default SLO). `recent_service_s` is each
    tenant's recently attained service (e.g. `decayed_service_s`); None: no entitlement gate."""
    specs = {t.tenant_id: t for t in tenants}
    by_tenant: dict[str, list[OpenTask]] = {}
    for task in open_tasks:
        by_tenant.setdefault(task.tenant_id, []).append(task)
    shares = service_shares(sorted(by_tenant), lambda t: specs.get(t, TenantSpec(t)).weight, recent_service_s or {})
    rows = []
    for tid, (share, entitled) in shares.items():
        spec = specs.get(tid, TenantSpec(tid))
        afs, n, overdue = tenant_afs(by_tenant[tid], spec, now_s, est)
        over = is_over_entitled(share, entitled, est.cfg.share_tolerance)
        rows.append((over, -afs / spec.weight, tid, afs, n, overdue, share, entitled))
    rows.sort(key=lambda r: r[:3])
    return [TenantShare(tid, afs, -neg, over, n, overdue, rank,
                        f"AFS {afs:.3g}/w {specs.get(tid, TenantSpec(tid)).weight:g} = {-neg:.3g}; "
                        f"share {share:.2f} vs entitled {entitled:.2f}"
                        + ("; over-entitled" if over else "") + (f"; {overdue} overdue" if overdue else ""))
            for rank, (over, neg, tid, afs, n, overdue, share, entitled) in enumerate(rows)]


def service_shares(active: Sequence[str], weight_of: Callable[[str], float],
                   recent_service_s: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """(share of the active tenants' recent service, entitled share w_i / sum of active w) per
    active tenant, in the order given. No recent service at all: every share is 0."""
    total_weight = sum(weight_of(t) for t in active)
    total_recent = sum(max(recent_service_s.get(t, 0.0), 0.0) for t in active)
    return {t: (max(recent_service_s.get(t, 0.0), 0.0) / total_recent if total_recent > 0 else 0.0,
                weight_of(t) / total_weight) for t in active}


def is_over_entitled(share: float, entitled: float, tolerance: float) -> bool:
    """Above its weight's share by more than the tolerance: it goes behind the others."""
    return share > entitled * (1 + tolerance)


def decayed_service_s(previous_s: float, elapsed_s: float, new_service_s: float, half_life_s: float) -> float:
    """Exponentially decayed service counter for `recent_service_s` (half-life in seconds)."""
    decay = 0.5 ** (max(elapsed_s, 0.0) / half_life_s) if half_life_s > 0 else 0.0
    return previous_s * decay + max(new_service_s, 0.0)


def fair_share_key(tenant_rank: int, atlas_key: tuple) -> tuple:
    """Compose with an ATLAS (or any shared.core.policy) key: tenants first across tenants, ATLAS
    order inside a tenant. The class (element 0, which preemption compares) becomes
    (tenant rank, ATLAS level), so a call preempts only for a better tenant or a better level
    within its tenant, and the rest of the ATLAS key is untouched."""
    return ((tenant_rank, atlas_key[0]),) + tuple(atlas_key[1:])
