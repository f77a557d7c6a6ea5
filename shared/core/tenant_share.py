"""Tenant fair share on the live path: which tenants' calls go behind the others'.

A tenant's charge is the engine time of its completed calls, whatever sessions, threads or
sessionless calls they ran under, kept as one exponentially decayed counter per tenant. Among the
tenants with recent service, a tenant whose share is above its weight's share (by the tolerance)
is over-entitled: its calls take a tenant class >= 1, behind every class-0 call; the others take
class 0. Over-entitled tenants are ranked among themselves by how far over they are, in doublings:
a share up to twice the entitled one is class 1, up to four times class 2, and so on (at most
MAX_TENANT_CLASS), so of two heavy tenants the heavier goes last, and near-equals share a class. So a fresh id, a session per call or no session at all resets a *program's* service but
never its tenant's charge, and a heavy tenant's calls cannot jump ahead of a light tenant's.

Only the order changes: a tenant alone on the engines still gets all of them (work-conserving),
and a light tenant that catches up loses its head start (its share rises), so classes converge
to the weighted shares instead of starving anyone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.core.fairness import decayed_service_s, is_over_entitled, service_shares

OVER_ENTITLED_CLASS = 1  # the first class of over-entitled tenants (0: every other tenant)
MAX_TENANT_CLASS = 16  # a share 2**15 times the entitled one and beyond
MAX_TENANTS = 10_000  # tenants tracked, and named in one message, at most


@dataclass(frozen=True)
class TenantShareConfig:
    # long enough to span a task's tool pauses, short enough that a tenant quiet for a few
    # minutes starts afresh
    half_life_s: float = 30.0
    tolerance: float = 0.05  # over-entitled above (1 + tolerance) x its weight's share
    max_tenants: int = MAX_TENANTS  # counters kept (smallest forgotten first)
    floor_s: float = 1e-4  # a counter decayed below this is forgotten: the tenant is no longer active
    weights: Mapping[str, float] = field(default_factory=dict)  # tenant -> weight (default 1)

    def __post_init__(self) -> None:
        if not (self.half_life_s > 0 and math.isfinite(self.half_life_s)):
            raise ValueError(f"half_life_s must be a finite number > 0, got {self.half_life_s!r}")
        if not (self.tolerance >= 0 and math.isfinite(self.tolerance)):
            raise ValueError(f"tolerance must be a finite number >= 0, got {self.tolerance!r}")
        if self.max_tenants < 1 or not self.floor_s >= 0:
            raise ValueError("max_tenants must be >= 1 and floor_s >= 0")
        for tenant, weight in self.weights.items():
            if not (isinstance(weight, int | float) and weight > 0 and math.isfinite(weight)):
                raise ValueError(f"tenant {tenant!r}: weight must be a finite number > 0, got {weight!r}")

    def weight_of(self, tenant: str) -> float:
        return float(self.weights.get(tenant, 1.0))


class TenantServiceLedger:
    """Decayed service per tenant; all counters decay together to the latest time seen."""

    def __init__(self, cfg: TenantShareConfig | None = None) -> None:
        self.cfg = cfg or TenantShareConfig()
        self._service: dict[str, float] = {}
        self._at_s: float | None = None

    def _decay_to(self, now_s: float) -> None:
        if self._at_s is None or now_s <= self._at_s:
            self._at_s = now_s if self._at_s is None else self._at_s
            return
        elapsed, self._at_s = now_s - self._at_s, now_s
        floor = self.cfg.floor_s
        decayed = {t: decayed_service_s(s, elapsed, 0.0, self.cfg.half_life_s) for t, s in self._service.items()}
        self._service = {t: s for t, s in decayed.items() if s >= floor}

    def charge(self, tenant: str, service_s: float, now_s: float) -> None:
        """Add a completed call's service (non-finite or negative charges are no service)."""
        self._decay_to(now_s)
        if not (math.isfinite(service_s) and service_s > 0):
            return
        self._service[tenant] = self._service.get(tenant, 0.0) + service_s
        if len(self._service) > self.cfg.max_tenants:
            del self._service[min(self._service, key=self._service.__getitem__)]

    def recent(self, now_s: float) -> dict[str, float]:
        self._decay_to(now_s)
        return dict(self._service)

    def classes(self, now_s: float) -> dict[str, int]:
        """The over-entitled tenants, each with OVER_ENTITLED_CLASS (every other tenant: class 0)."""
        return tenant_classes(self.recent(now_s), self.cfg)


def tenant_classes(recent_service_s: Mapping[str, float], cfg: TenantShareConfig) -> dict[str, int]:
    """Tenant class per over-entitled tenant among those with recent service (pure)."""
    active = sorted(t for t, s in recent_service_s.items() if s > 0)
    shares = service_shares(active, cfg.weight_of, recent_service_s)
    return {t: over_entitled_class(share / entitled) for t, (share, entitled) in shares.items()
            if is_over_entitled(share, entitled, cfg.tolerance)}


def over_entitled_class(ratio: float) -> int:
    """The class of a tenant whose share is `ratio` (> 1) times its entitled one."""
    return min(OVER_ENTITLED_CLASS + int(math.floor(math.log2(max(ratio, 1.0)))), MAX_TENANT_CLASS)


def parse_tenant_weights(raw: str) -> dict[str, float]:
    """`TENANT_WEIGHTS`: "acme=2,beta=0.5" (empty: every tenant weighs 1)."""
    weights: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        tenant, sep, value = item.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = float("nan")
        if not sep or not tenant.strip() or not (weight > 0 and math.isfinite(weight)):
            raise ValueError(f"TENANT_WEIGHTS: {item!r} must be tenant=weight with a finite weight > 0")
        weights[tenant.strip()] = weight
    return weights
