"""Per-tenant and per-session admission limits for calls: concurrency and request rate.

Checked when a call is admitted (before it reaches the mesh) and released when its stream closes.
Breaking a limit is a 429 in OpenAI's error format with `Retry-After`, so the official client
backs off and retries by itself. This limiter counts one API process alone (SHARED_LIMITS=false):
with N workers a tenant gets up to N times the limits. By default the tenant limits are shared by
every worker instead (shared_limits.py, whose `call_limiter` picks one).

Settings (environment): MAX_CONCURRENT_CALLS_PER_SESSION, MAX_CONCURRENT_CALLS_PER_TENANT,
MAX_REQUESTS_PER_S_PER_TENANT (0 = no rate limit) and REQUEST_BURST_PER_TENANT.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from services.session_api.errors import ApiError


def too_many(message: str, code: str, retry_after_s: float = 1.0) -> ApiError:
    return ApiError(429, message, "rate_limit_error", code,
                    headers={"Retry-After": str(max(1, round(retry_after_s)))})


@dataclass
class _Bucket:
    tokens: float
    refilled_s: float


class CallLimiter:
    def __init__(self, per_session: int, per_tenant: int, rate_per_s: float, burst: int,
                 clock=time.monotonic) -> None:
        self.per_session = per_session
        self.per_tenant = per_tenant
        self.rate_per_s = rate_per_s
        self.burst = max(burst, 1)
        self.clock = clock
        self._by_session: defaultdict[str, int] = defaultdict(int)
        self._by_tenant: defaultdict[str, int] = defaultdict(int)
        self._buckets: dict[str, _Bucket] = {}

    @classmethod
    def from_settings(cls, settings) -> CallLimiter:
        return cls(settings.max_concurrent_calls_per_session, settings.max_concurrent_calls_per_tenant,
                   settings.max_requests_per_s_per_tenant, settings.request_burst_per_tenant)

    async def start(self) -> CallLimiter:
        return self

    async def close(self) -> None:
        pass

    async def admit(self, tenant: str, session_id: str | None, shown_as: str | None = None) -> None:
        """Count one call in, or raise a 429; every successful admit needs one `release`.

        `session_id` is the key (the program id: per tenant); `shown_as` the client's own id, for
        the message (the program id never leaves the mesh)."""
        self._take_rate(tenant)
        if self._by_tenant[tenant] >= self.per_tenant:
            raise too_many(f"tenant has {self._by_tenant[tenant]} calls in flight, the limit is "
                           f"{self.per_tenant}; retry when one finishes", "too_many_concurrent_calls")
        if session_id is not None and self._by_session[session_id] >= self.per_session:
            raise too_many(f"session {shown_as or session_id!r} has {self._by_session[session_id]} calls in flight, "
                           f"the limit is {self.per_session}", "too_many_concurrent_calls_in_session")
        self._by_tenant[tenant] += 1
        if session_id is not None:
            self._by_session[session_id] += 1

    def release(self, tenant: str, session_id: str | None) -> None:
        for table, key in ((self._by_tenant, tenant), (self._by_session, session_id)):
            if key is None or key not in table:
                continue
            table[key] -= 1
            if table[key] <= 0:
                del table[key]  # idle tenants and ended sessions leave nothing behind

    def in_flight(self, tenant: str) -> int:
        return self._by_tenant.get(tenant, 0)

    def _take_rate(self, tenant: str) -> None:
        if self.rate_per_s <= 0:
            return
        now_s = self.clock()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = _Bucket(float(self.burst), now_s)
        bucket.tokens = min(self.burst, bucket.tokens + (now_s - bucket.refilled_s) * self.rate_per_s)
        bucket.refilled_s = now_s
        if bucket.tokens < 1.0:
            wait_s = (1.0 - bucket.tokens) / self.rate_per_s
            raise too_many(f"tenant is over its request rate of {self.rate_per_s:g}/s "
                           f"(burst {self.burst}); retry in {wait_s:.2f} s", "rate_limit_exceeded", wait_s)
        bucket.tokens -= 1.0

