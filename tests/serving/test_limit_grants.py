"""Admissions granted ahead (services/session_api/limit_grants.py, shared_limits.py): the rule asks
only far from the limits; on a real owner a worker's later calls skip the round trip, the owner
counts every grant, idle grants go back, and near a limit every call still asks."""

from __future__ import annotations

import asyncio
import time

from hypothesis import given
from hypothesis import strategies as st

from runtime.nats_server import NatsServer
from services.process_table.tenant_limits import TenantLimitOwner
from services.session_api.limit_grants import BATCHES_PER_S_MIN, BURST_BATCHES_MIN, grants_wanted
from services.session_api.settings import SessionApiSettings
from services.session_api.shared_limits import GRANT_IDLE_S, SNAPSHOT_S, SharedCallLimiter
from shared.bus.bus import Bus
from shared.core.tenant_limits import Limits
from shared.protocol import messages as m
from shared.protocol import subjects

limits_st = st.builds(Limits, st.integers(1, 10_000), st.one_of(st.just(0.0), st.floats(0.1, 1e5)),
                      st.integers(1, 100_000))


@given(limits_st, st.integers(0, 300), st.integers(0, 20_000), st.integers(0, 256))
def test_grants_stay_within_half_the_concurrency_limit_and_up_to_the_batch(limits, held, owner_in_flight, ahead):
    wanted = grants_wanted(limits, held, owner_in_flight, ahead)
    assert 0 <= wanted <= max(ahead - held, 0)
    if wanted:
        assert held <= ahead // 2
        assert owner_in_flight + wanted <= limits.max_in_flight // 2
        assert limits.rate_per_s == 0 or (limits.rate_per_s >= BATCHES_PER_S_MIN * ahead
                                          and limits.burst >= BURST_BATCHES_MIN * ahead)


@given(st.integers(1, 64))
def test_a_tenant_far_from_default_limits_gets_a_whole_batch(ahead):
    assert grants_wanted(Limits(4096, 5000.0, 10_000), 0, 1, ahead) == ahead


async def _owner_and_worker(nats: NatsServer, **settings):
    """A limit owner whose admission requests are counted (number of calls each), and one worker."""
    owner_bus = await Bus.connect(nats.url, "process_table")
    owner = TenantLimitOwner(owner_bus)
    asked: list[int] = []

    async def counting(incoming):
        if isinstance(incoming.body, m.AdmitCalls):
            asked.append(len(incoming.body.tenants))
        return await owner.on_message(incoming)
    await owner_bus.subscribe(subjects.all_limits(), counting, types=(m.AdmitCalls, m.LimitUsage))
    worker_bus = await Bus.connect(nats.url, "session_api")
    limiter = await SharedCallLimiter(worker_bus, SessionApiSettings(nats_url=nats.url, **settings)).start()
    return owner, limiter, asked, (owner_bus, worker_bus)


async def test_later_calls_use_grants_and_idle_grants_go_back(tmp_path):
    nats = NatsServer(tmp_path / "nats").start()
    owner, limiter, asked, buses = await _owner_and_worker(nats, limit_grants_ahead=4)
    try:
        await limiter.admit("t", None)  # asks itself; grants follow
        deadline = time.monotonic() + 5
        while owner.ledger.in_flight("t") != 1 + 4:
            assert time.monotonic() < deadline, "the grants never reached the owner's count"
            await asyncio.sleep(0.01)
        requests = len(asked)
        for _ in range(2):
            await limiter.admit("t", None)  # held grants: no round trip
        assert len(asked) == requests and owner.ledger.in_flight("t") == 5  # granted, so counted already
        for _ in range(3):
            limiter.release("t", None)
        await asyncio.sleep(GRANT_IDLE_S + 2 * SNAPSHOT_S + 0.2)  # idle: the grants go back too
        assert owner.ledger.in_flight("t") == 0 and limiter.in_flight("t") == 0
    finally:
        await _stop(owner, limiter, buses, nats)


async def test_a_stopping_worker_gives_its_grants_back_at_once(tmp_path):
    """Not after the owner's SILENT_WORKER_S: a replaced API worker would hold its tenants' grants."""
    nats = NatsServer(tmp_path / "nats").start()
    owner, limiter, asked, buses = await _owner_and_worker(nats, limit_grants_ahead=4)
    try:
        await limiter.admit("t", None)
        deadline = time.monotonic() + 5
        while owner.ledger.in_flight("t") != 1 + 4:
            assert time.monotonic() < deadline, "the grants never reached the owner's count"
            await asyncio.sleep(0.01)
        await limiter.close()  # one call still in flight, four grants held
        deadline = time.monotonic() + 0.5  # well within the snapshot interval and the owner's silence
        while owner.ledger.in_flight("t") != 1:
            assert time.monotonic() < deadline, f"the owner still counts {owner.ledger.in_flight('t')}"
            await asyncio.sleep(0.01)
    finally:
        await _stop(owner, limiter, buses, nats)


async def test_near_a_limit_every_call_asks_the_owner(tmp_path):
    nats = NatsServer(tmp_path / "nats").start()
    owner, limiter, asked, buses = await _owner_and_worker(nats, limit_grants_ahead=4,
                                                           max_concurrent_calls_per_tenant=6)
    try:
        for _ in range(3):
            await limiter.admit("t", None)
        await asyncio.sleep(0.1)
        assert asked == [1, 1, 1] and owner.ledger.in_flight("t") == 3  # 3 + 4 would pass half of 6
    finally:
        await _stop(owner, limiter, buses, nats)


async def _stop(owner, limiter, buses, nats) -> None:
    await limiter.close()
    for bus in buses:
        await bus.close()
    nats.stop()
