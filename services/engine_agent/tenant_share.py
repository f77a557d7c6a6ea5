"""An engine's side of tenant fair share: what it charged each tenant, and the classes it applies.

The agent adds every completed call's engine time to its tenant's counter (cumulative since the
agent started; queue snapshots carry the counters to the controller) and takes the controller's
`TenantShares`: the tenants whose calls go behind the others' (class 1; anyone else class 0). A
malformed `TenantShares` changes nothing; classes not renewed within the message's `valid_for_s`
lapse (a stopped controller holds nobody back).
"""

from __future__ import annotations

import math
import time

from shared.core.tenant_share import MAX_TENANT_CLASS, MAX_TENANTS
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol.ids import DEFAULT_TENANT_ID, id_problem


class EngineTenantShare:
    def __init__(self, max_tenants: int = MAX_TENANTS) -> None:
        self._served: LRU[str, float] = LRU(max_tenants)  # the least recently charged forgotten first
        self.classes: dict[str, int] = {}
        self._expires_at_s = math.inf

    def charge(self, tenant: str, service_s: float) -> None:
        if service_s > 0:  # NaN compares false: no service
            tenant = tenant or DEFAULT_TENANT_ID
            self._served.put(tenant, self._served.get(tenant, 0.0) + service_s)

    def counters(self) -> dict[str, float]:
        return dict(self._served.items())

    def class_of(self, tenant: str) -> int:
        return self.classes.get(tenant or DEFAULT_TENANT_ID, 0)

    def lapse(self, now_s: float | None = None) -> dict[str, int] | None:
        """{} when the classes were not renewed in time (apply it), else None."""
        now_s = time.monotonic() if now_s is None else now_s
        if not self.classes or now_s < self._expires_at_s:
            return None
        self.classes = {}
        return {}

    def take(self, shares: m.TenantShares, log) -> dict[str, int] | None:
        """`on_shares`, with a refusal logged (the agents' handler)."""
        try:
            return self.on_shares(shares)
        except ValueError as exc:
            log.warning("tenant_shares_refused", reason=str(exc))
            return None

    def on_shares(self, shares: m.TenantShares, now_s: float | None = None) -> dict[str, int] | None:
        """The new classes when they changed, else None; raises ValueError for a malformed message."""
        now_s = time.monotonic() if now_s is None else now_s
        classes = shares.classes
        if len(classes) > MAX_TENANTS:
            raise ValueError(f"{len(classes)} tenant classes (at most {MAX_TENANTS})")
        for tenant, value in classes.items():
            if id_problem(tenant) is not None:
                raise ValueError(f"tenant id {tenant[:40]!r} {id_problem(tenant)}")
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TENANT_CLASS:
                raise ValueError(f"tenant {tenant!r}: class {value!r} is not an int in [0, {MAX_TENANT_CLASS}]")
        valid_for = shares.valid_for_s
        if isinstance(valid_for, bool) or not isinstance(valid_for, int | float) or not 0 < valid_for <= 3600:
            raise ValueError(f"valid_for_s {valid_for!r} is not a number in (0, 3600]")
        self._expires_at_s = now_s + valid_for
        new = {t: c for t, c in classes.items() if c}
        if new == self.classes:
            return None
        self.classes = new
        return new
