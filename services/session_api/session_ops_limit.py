"""The rate of a tenant's session operations (`/v1/sessions`: open, read, close), per API worker.

Calls are limited over every worker (shared_limits.py); session operations are not calls and never
reach that owner, so a flood of them (lookups of made-up ids, opens and closes in a loop) would
reach the process table unbounded. Each worker keeps a token bucket per tenant
(MAX_SESSION_OPS_PER_S_PER_TENANT, burst SESSION_OPS_BURST_PER_TENANT; 0: no limit) with the core's
rule; a refusal is a 429 with Retry-After. Per worker: N workers let a tenant make N times the rate.
"""

from __future__ import annotations

import time

from services.session_api.limits import too_many
from shared.core.tenant_limits import ADMITTED, Limits, TokenBucket, decide
from shared.lru import LRU

MAX_TENANTS = 65_536  # buckets kept; the least recently used tenant's is forgotten (it starts full again)


class SessionOpsLimiter:
    def __init__(self, rate_per_s: float, burst: int, clock=time.monotonic) -> None:
        # only the rate applies: decide() is asked with nothing in flight, so max_in_flight never binds
        self.limits = Limits(max_in_flight=1, rate_per_s=rate_per_s, burst=burst)
        self.clock = clock
        self._buckets: LRU[str, TokenBucket] = LRU(MAX_TENANTS)

    def admit(self, tenant: str) -> None:
        """Take one token of the tenant's bucket, or raise a 429."""
        if self.limits.rate_per_s <= 0:
            return
        now_s = self.clock()
        bucket = self._buckets.touch(tenant)
        if bucket is None:
            bucket = TokenBucket(float(self.limits.burst), now_s)
            self._buckets.put(tenant, bucket)
        verdict = decide(0, bucket, self.limits, now_s)
        if verdict.refused != ADMITTED:
            raise too_many(f"tenant is over its rate of session operations, {self.limits.rate_per_s:g}/s "
                           f"(burst {self.limits.burst}); retry in {verdict.retry_after_s:.2f} s",
                           "rate_limit_exceeded", verdict.retry_after_s)
