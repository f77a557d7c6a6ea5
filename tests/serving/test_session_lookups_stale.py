"""While the process table does not answer, a call of a session it recently said was open is served
on that answer (session_lookups.py); any answer about the session itself is never papered over."""

from __future__ import annotations

import pytest

from services.session_api.errors import ApiError, session_not_found, unavailable
from services.session_api.session_lookups import SessionLookups
from shared.protocol import messages as m


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _replies(*outcomes):
    it = iter(outcomes)

    async def fetch():
        out = next(it)
        if isinstance(out, Exception):
            raise out
        return out
    return fetch


OPEN = m.SessionInfo(session_id="p", tenant="acme", state="open")
SILENT = unavailable("process_table unavailable (no responders); retry shortly", code="process_table_unavailable")


async def test_a_silent_table_serves_a_recent_open_answer_then_gives_up_after_the_window():
    clock = Clock()
    lookups = SessionLookups(ttl_s=1.0, clock=clock, stale_if_unavailable_s=60.0)
    fetch = _replies(OPEN, SILENT, SILENT)
    assert await lookups.lookup("acme\0p", fetch, cached_ok=True) == OPEN
    clock.now = 30.0  # past the TTL: the table is asked, says nothing, the old answer serves
    assert await lookups.lookup("acme\0p", fetch, cached_ok=True) == OPEN
    assert lookups.num_stale_served == 1
    clock.now = 61.0  # past the window: the 503 reaches the client
    with pytest.raises(ApiError) as err:
        await lookups.lookup("acme\0p", fetch, cached_ok=True)
    assert err.value.code == "process_table_unavailable"


async def test_answers_about_the_session_and_reads_of_it_are_never_served_stale():
    clock = Clock()
    lookups = SessionLookups(ttl_s=1.0, clock=clock, stale_if_unavailable_s=60.0)
    fetch = _replies(OPEN, session_not_found("p"), SILENT, OPEN, SILENT)
    await lookups.lookup("acme\0p", fetch, cached_ok=True)
    clock.now = 5.0
    with pytest.raises(ApiError) as err:  # the table answered: the session is gone
        await lookups.lookup("acme\0p", fetch, cached_ok=True)
    assert err.value.status == 404
    with pytest.raises(ApiError):  # ... and its old answer went with it
        await lookups.lookup("acme\0p", fetch, cached_ok=True)
    await lookups.lookup("acme\0p", fetch, cached_ok=True)  # open again (a client's own id)
    clock.now = 10.0
    with pytest.raises(ApiError):  # GET /v1/sessions/{id} (cached_ok=False) always wants the table
        await lookups.lookup("acme\0p", fetch, cached_ok=False)


async def test_off_by_setting_and_never_for_a_forgotten_session():
    clock = Clock()
    off = SessionLookups(ttl_s=1.0, clock=clock, stale_if_unavailable_s=0.0)
    fetch = _replies(OPEN, SILENT)
    await off.lookup("acme\0p", fetch, cached_ok=True)
    clock.now = 2.0
    with pytest.raises(ApiError):
        await off.lookup("acme\0p", fetch, cached_ok=True)
    on = SessionLookups(ttl_s=1.0, clock=clock, stale_if_unavailable_s=60.0)
    fetch = _replies(OPEN, SILENT)
    await on.lookup("acme\0p", fetch, cached_ok=True)
    on.forget("acme\0p")  # closed through this API
    with pytest.raises(ApiError):
        await on.lookup("acme\0p", fetch, cached_ok=True)
