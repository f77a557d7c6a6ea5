"""The call stream's shell (services/session_api/call_stream.py) on a fake mesh: one `place()` for the
first placement and a re-placement, options fixed at construction, close's once-only duties."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from services.session_api.call_counts import SessionCallCounts
from services.session_api.call_stream import CallStream, StreamOptions, TokenListener
from services.session_api.errors import ApiError
from services.session_api.settings import SessionApiSettings
from shared.bus.errors import NoResponders
from shared.protocol import messages as m

pytestmark = pytest.mark.timeout(20)


class FakeMesh:
    """The parts of the gateway a stream uses; the router places calls on `engines` in turn."""

    def __init__(self, engines=("e0", "e1")) -> None:
        self.settings = SessionApiSettings(engine_ttl_s=0.1, stalled_stream_grace_s=0.0, max_redispatches=2)
        self.completed_calls = SessionCallCounts()
        self.queues: dict[str, asyncio.Queue] = {}
        self.routes: list[m.RouteCall] = []
        self.cancelled: list[tuple[str, str]] = []
        self.live = set(engines)
        self._engines = list(engines)
        self.route_error: Exception | None = None
        self.bus = SimpleNamespace(request=self._route)

    async def _route(self, subject, route, timeout_s, if_lost, responder):
        if self.route_error is not None:
            raise self.route_error
        self.routes.append(route)
        return m.CallRouted(call_id=route.call_id, program_id=route.program_id, engine_id=self._engines.pop(0))

    def send(self, index: int, tokens=(), done=False, subject=None, **fields) -> None:
        subject = subject or self.routes[-1].reply_subject
        self.queues[subject].put_nowait(m.TokenChunk(call_id="c1", index=index, token_ids=list(tokens), done=done,
                                                     **fields))

    def engine_is_live(self, engine_id):
        return engine_id in self.live

    def engine_incarnation(self, engine_id):
        return 1

    def engine_silent_alone(self, engine_id):
        return False

    def reconnects(self):
        return 0

    def token_subject(self, key):
        return f"inbox.{key}"

    async def subscribe_tokens(self, call_id, reply_subject, queue):
        self.queues[reply_subject] = queue
        return TokenListener(self, reply_subject)

    def stop_listening(self, reply_subject):
        self.queues.pop(reply_subject, None)

    async def cancel(self, engine_id, call_id):
        self.cancelled.append((engine_id, call_id))

    def spawn(self, coro):
        return asyncio.ensure_future(coro)


def _route() -> m.RouteCall:
    return m.RouteCall(call_id="c1", program_id="p1", thread_id="t", prompt_tokens=3, max_tokens=8,
                       reply_subject="inbox.c1", primary_engine="e9")


async def test_chunks_in_order_then_done_count_the_completion_and_release_once():
    mesh, released = FakeMesh(), []
    stream = CallStream(mesh, "c1", StreamOptions(release=lambda: released.append(1)))
    await stream.place(_route())
    assert stream.engine_id == "e0" and mesh.routes[0].reply_subject == "inbox.c1"
    mesh.send(0, [1, 2])
    mesh.send(1, [3], done=True, finish_reason="stop", output_tokens=3)
    assert [t async for t in stream] == [[1, 2], [3]]
    assert stream.done and stream.finish_reason == "stop" and stream.output_tokens == 3
    assert mesh.completed_calls.get("p1") == 1
    await stream.close()
    await stream.close()
    assert released == [1] and mesh.cancelled == []  # finished: nothing to cancel


async def test_a_lost_engine_before_any_token_is_placed_again_by_the_same_place():
    mesh = FakeMesh()
    stream = CallStream(mesh, "c1", StreamOptions(client_streams=False))  # held: always restartable
    await stream.place(_route())
    mesh.send(0, [7, 7])  # held, never seen by the client
    mesh.live.discard("e0")
    pieces = stream.__aiter__()
    task = asyncio.ensure_future(anext(pieces))
    while len(mesh.routes) < 2:
        await asyncio.sleep(0.01)
    again = mesh.routes[1]
    assert again.reply_subject == "inbox.c1-r1" and again.primary_engine is None  # fresh subject, router chooses
    assert "inbox.c1" not in mesh.queues  # a late chunk of the lost placement reaches nobody
    mesh.send(0, [1])
    mesh.send(1, [2], done=True)
    assert await task == [1, 2]  # only the new placement's tokens, once, at the end
    assert stream.engine_id == "e1" and stream.redispatches == 1
    await stream.close()


async def test_opt_out_fails_at_once_with_engine_lost_and_close_cancels():
    mesh = FakeMesh()
    stream = CallStream(mesh, "c1", StreamOptions(allow_redispatch=False))
    await stream.place(_route())
    mesh.live.clear()
    with pytest.raises(ApiError) as err:
        [t async for t in stream]
    assert (err.value.status, err.value.code) == (503, "engine_lost") and len(mesh.routes) == 1
    await stream.close()
    assert mesh.cancelled == [("e0", "c1")]


async def test_a_gap_cancels_the_old_engine_and_a_failed_replacement_names_the_gap():
    mesh = FakeMesh()
    stream = CallStream(mesh, "c1")
    await stream.place(_route())
    mesh.send(1, [5])  # chunk 0 never came
    mesh.route_error = NoResponders("router down")
    with pytest.raises(ApiError) as err:
        [t async for t in stream]
    assert err.value.code == "stream_gap" and "expected 0, got 1" in err.value.message
    assert mesh.cancelled == [("e0", "c1")]


async def test_a_call_never_placed_releases_but_does_not_close_its_session():
    mesh, released, closed = FakeMesh(), [], []

    async def close_session():
        closed.append(1)

    stream = CallStream(mesh, "c1", StreamOptions(release=lambda: released.append(1), close_session=close_session))
    mesh.route_error = NoResponders("router down")
    with pytest.raises(NoResponders):
        await stream.place(_route())
    await stream.close()
    assert released == [1] and closed == [] and mesh.cancelled == []


async def test_a_final_call_closes_its_session_once_on_close():
    mesh, closed = FakeMesh(), []

    async def close_session():
        closed.append(1)

    stream = CallStream(mesh, "c1", StreamOptions(close_session=close_session))
    await stream.place(_route())
    mesh.send(0, [1], done=True)
    assert [t async for t in stream] == [[1]]
    await stream.close()
    await stream.close()
    assert closed == [1]


def _send_piece(mesh: FakeMesh, index: int, body: bytes, done=False, **fields) -> None:
    mesh.queues[mesh.routes[-1].reply_subject].put_nowait(
        m.TokenChunk(call_id="c1", index=index, body=body, done=done, **fields))


async def test_relayed_pieces_that_queued_up_leave_as_one_piece_and_one_that_did_not_leaves_alone():
    mesh = FakeMesh()
    stream = CallStream(mesh, "c1", StreamOptions(relay=True))
    await stream.place(_route())
    _send_piece(mesh, 0, b"a", http_status=200, content_type="text/event-stream")
    _send_piece(mesh, 1, b"b")
    pieces = stream.__aiter__()
    assert await anext(pieces) == b"ab" and stream.http_status == 200  # both waited: one write
    task = asyncio.ensure_future(anext(pieces))
    await asyncio.sleep(0.01)
    assert not task.done()  # a piece is never held back for another: the next one comes alone
    _send_piece(mesh, 2, b"c")
    assert await task == b"c"
    _send_piece(mesh, 3, b"d")
    _send_piece(mesh, 4, b"", done=True)
    assert [p async for p in pieces] == [b"d"] and stream.done
    await stream.close()


async def test_relayed_pieces_queued_before_an_engine_error_reach_the_client_first():
    mesh = FakeMesh()
    stream = CallStream(mesh, "c1", StreamOptions(relay=True))
    await stream.place(_route())
    _send_piece(mesh, 0, b"a", http_status=200, content_type="text/event-stream")
    _send_piece(mesh, 1, b"b")
    _send_piece(mesh, 2, b"", done=True, error_code="unavailable", error_description="upstream gone")
    got = []
    with pytest.raises(ApiError) as err:
        async for piece in stream:
            got.append(piece)
    assert got == [b"ab"] and err.value.status == 503
    await stream.close()
