"""How many admissions an API worker asks its limit owner for ahead of the calls that use them (a
pure module: no I/O, clock or asyncio).

A call that finds a grant held for its tenant starts without the round trip to the owner. Grants
are real admissions at the owner (each counted in flight and charged one rate token when granted),
so the limits stay exact; the price is that a worker's unused grants count against its tenant
until used or given back. Hence grants are asked for only while the tenant is far from both
limits: at most half the concurrency limit in flight with them, and a rate limit, if any, that
refills a whole batch of grants many times a second and bursts well above it. Near a limit every
call asks the owner itself, as without grants.
"""

from __future__ import annotations

from shared.core.tenant_limits import Limits

# a batch of grants is charged to the rate limit only when it refills this many batches a second
BATCHES_PER_S_MIN = 10.0
BURST_BATCHES_MIN = 4  # and when its burst holds this many batches


def grants_wanted(limits: Limits, held: int, owner_in_flight: int, ahead: int) -> int:
    """Grants to ask for now: none while more than half of `ahead` are still `held`; otherwise up
    to `ahead` held, if the tenant's calls in flight as the owner last counted them (`owner_in_flight`,
    held grants included) stay within half its concurrency limit with them and its rate limit is
    wide enough."""
    if ahead <= 0 or held > ahead // 2:
        return 0
    if limits.rate_per_s > 0 and (limits.rate_per_s < BATCHES_PER_S_MIN * ahead
                                  or limits.burst < BURST_BATCHES_MIN * ahead):
        return 0
    wanted = ahead - held
    if owner_in_flight + wanted > limits.max_in_flight // 2:
        return 0
    return wanted
