"""Two services creating the same replicated stream at once: in a 3-node cluster the second one's
create can be refused ("name already in use") while the first one's is not yet placed, so the
follow-up read answers 404 for a moment. Seen once in seven runs of the multi-host test (the router
died at start-up). No single server can produce that order, so a stand-in for the cluster's
JetStream API plays it; the real cluster path is the multi-host test's start-up."""

from __future__ import annotations

import nats.js.errors
import pytest

from shared.bus import jetstream, unavailable


class _ClusterMidCreate:
    """add_stream: the name is taken; stream_info / update_stream: 404 for the first `misses` reads."""

    def __init__(self, misses: int) -> None:
        self.misses = misses
        self.reads = 0

    async def add_stream(self, config):
        raise nats.js.errors.BadRequestError(code=400, err_code=10058,
                                             description="stream name already in use with a different configuration")

    async def _read(self, name: str):
        self.reads += 1
        if self.reads <= self.misses:
            raise nats.js.errors.NotFoundError(code=404, err_code=10059, description="stream not found")
        return f"info of {name}"

    async def stream_info(self, name):
        return await self._read(name)

    async def update_stream(self, config):
        return await self._read(config.name)


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch):
    monkeypatch.setattr(unavailable, "RETRY_EVERY_S", 0.01)


@pytest.mark.parametrize("may_update", [False, True])
async def test_a_stream_another_service_is_still_creating_is_waited_for(may_update):
    js = _ClusterMidCreate(misses=2)
    info = await jetstream.ensure_audit_stream(js, may_update=may_update, replicas=3)
    assert info == f"info of {jetstream.audit_stream_config().name}"
    assert js.reads == 3


async def test_a_stream_that_never_appears_still_fails_once_the_wait_is_over(monkeypatch):
    monkeypatch.setattr(unavailable, "JETSTREAM_WAIT_S", 0.05)
    js = _ClusterMidCreate(misses=10**9)
    with pytest.raises(nats.js.errors.ServiceUnavailableError, match="still being created elsewhere"):
        await jetstream.ensure_completions_stream(js, replicas=3)
