"""A cached session reply whose program has moved on is refreshed in the background: a call never
waits for it, and the SERPT estimate the next calls carry follows the program (session_lookups.py)."""

from __future__ import annotations

import asyncio

from services.session_api.session_lookups import REVALIDATE_S, SessionLookups
from shared.protocol import messages as m


def _info(completed: int, remaining_s: float) -> m.SessionInfo:
    return m.SessionInfo(session_id="p", tenant="acme", state="open", primary_engine="e0",
                         num_completed_calls=completed, expected_remaining_s=remaining_s)


async def test_a_progressed_session_is_refreshed_in_the_background_and_calls_never_wait():
    now = [0.0]
    lookups = SessionLookups(ttl_s=60.0, clock=lambda: now[0])
    answers = [_info(0, 9.0), _info(2, 4.0)]
    asked = []
    release = asyncio.Event()

    async def fetch():
        asked.append(now[0])
        if len(asked) == 2:
            await release.wait()  # the table is slow: the call must not wait on the refresh
        return answers[len(asked) - 1]

    key = "acme\0p"
    assert (await lookups.lookup(key, fetch, True, completed_seen=0)).expected_remaining_s == 9.0
    now[0] = REVALIDATE_S / 2
    assert (await lookups.lookup(key, fetch, True, completed_seen=2)).expected_remaining_s == 9.0
    assert len(asked) == 1  # young enough: no refresh yet
    now[0] = REVALIDATE_S * 2
    assert (await lookups.lookup(key, fetch, True, completed_seen=0)).expected_remaining_s == 9.0
    assert len(asked) == 1  # the program has not moved on since the reply
    got = await asyncio.wait_for(lookups.lookup(key, fetch, True, completed_seen=2), 1.0)
    assert got.expected_remaining_s == 9.0  # served from the cache at once
    await asyncio.sleep(0)
    assert len(asked) == 2  # and a fresh reply asked for
    assert (await lookups.lookup(key, fetch, True, completed_seen=2)).expected_remaining_s == 9.0
    assert len(asked) == 2  # one refresh in flight at a time
    release.set()
    await asyncio.sleep(0.01)
    assert (await lookups.lookup(key, fetch, True, completed_seen=2)).expected_remaining_s == 4.0
    assert lookups.num_asked == 2


async def test_a_failed_refresh_leaves_the_cached_reply():
    from services.session_api.errors import unavailable

    now = [0.0]
    lookups = SessionLookups(ttl_s=60.0, clock=lambda: now[0])
    calls = []

    async def fetch():
        calls.append(1)
        if len(calls) > 1:
            raise unavailable("process_table unavailable (no responders); retry shortly",
                              code="process_table_unavailable")
        return _info(0, 9.0)

    await lookups.lookup("k", fetch, True, completed_seen=0)
    now[0] = REVALIDATE_S * 2
    assert (await lookups.lookup("k", fetch, True, completed_seen=1)).expected_remaining_s == 9.0
    await asyncio.sleep(0.01)
    assert (await lookups.lookup("k", fetch, True, completed_seen=1)).expected_remaining_s == 9.0
