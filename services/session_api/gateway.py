"""The API's side of the mesh: sessions by request/reply to the process table, calls through the
router, token streams back on the call's own subject, and engine liveness from heartbeats.

When a call's engine stops heartbeating, the call is placed again on another engine if the client
has not seen any of its tokens yet (services/session_api/stream_machine.py); otherwise, or when the
client opted out, the stream fails with a retryable 503. A missing chunk is a retryable 503 too.

Token streams: one wildcard subscription on this process's own inbox (`<inbox>.*`, an inbox from
the NATS client) carries every call's chunks; each call's reply subject is `<inbox>.<call id>`
and a dict sends a chunk to its call's queue. A subscription per call cost a SUB and an UNSUB
per call and a reader task per subscription in nats-py, measured as a large share of the API's
per-call CPU; with the wildcard the reply subject is live before the call is placed.
"""

from __future__ import annotations

import asyncio
import time

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from services.session_api import metrics
from services.session_api.call_stream import CallStream, StreamOptions, TokenListener
from services.session_api.calls import PreparedCall
from services.session_api.engine_beats import EngineBeats
from services.session_api.errors import ApiError, session_ended, session_not_found, unavailable
from services.session_api.model_tokenizer import ModelTokenizers
from services.session_api.peer_notes import PeerNotes
from services.session_api.schemas import SessionView
from services.session_api.served_models import ServedModel, ServedModels
from services.session_api.session_closes import SessionCloses
from services.session_api.session_ids import checked, is_issued, new_issued_id, program_id_for
from services.session_api.session_lookups import SessionLookups, lookup_key
from services.session_api.session_ops_limit import SessionOpsLimiter
from services.session_api.settings import SessionApiSettings
from services.session_api.shared_limits import call_limiter
from services.session_api.tenant_salts import TenantSalts
from shared.bus.bus import Bus
from shared.bus.errors import BusError, NoResponders, RemoteError, RequestTimeout
from shared.bus.incoming import Incoming
from shared.bus.lost_requests import IfLost
from shared.core.size_hints import hinted_or_learned
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import decode
from shared.protocol.errors import ErrorCode, ProtocolError
from shared.protocol.nats_roles import PROCESS_TABLE

log = get_logger()


def _view(info: m.SessionInfo, session_id: str) -> SessionView:
    """The process table's view, under the id the client knows (not the program id)."""
    return SessionView(
        id=session_id, name=info.name or None, workload_class=info.workload_class or None,
        status="open" if info.state == "open" else ("expired" if info.state == "expired" else "closed"),
        created_at=info.opened_at_ns / 1e9, closed_at=None if info.closed_at_ns is None else info.closed_at_ns / 1e9,
        attained_service_s=info.service_s, total_service_s=info.total_service_s, wait_s=info.wait_s,
        mlfq_level=info.level, num_calls=info.num_calls,
        num_threads=len(info.thread_service_s) or (1 if info.num_calls else 0),
        primary_engine=info.primary_engine, promotions=info.epoch, expected_remaining_s=info.expected_remaining_s,
        hint_scale_s=info.hint_scale_s)


def _bus_unavailable(service: str, exc: BusError) -> ApiError:
    return unavailable(f"{service} unavailable ({exc}); retry shortly", code=f"{service}_unavailable")


class Gateway:
    def __init__(self, bus: Bus, settings: SessionApiSettings) -> None:
        self.bus = bus
        self.settings = settings
        # per-process caches that the other API workers keep filled too (peer_notes.py)
        self.peers = PeerNotes(bus, settings.max_threads_per_session)
        self.outputs = self.peers.outputs
        self.limits = call_limiter(bus, settings)  # per tenant over every API worker (shared_limits.py)
        self.session_ops = SessionOpsLimiter(settings.max_session_ops_per_s_per_tenant,
                                             settings.session_ops_burst_per_tenant)
        self.completed_calls = self.peers.completed_calls  # the ATLAS base's freshness check (call_counts.py)
        self.models = ServedModels()  # what the live engines serve (their heartbeats)
        self.tokenizers = ModelTokenizers()  # real models' own tokenizers
        self.session_lookups = SessionLookups(settings.session_cache_ttl_s,
                                              stale_if_unavailable_s=settings.session_stale_if_unavailable_s)
        self.session_threads = self.peers.session_threads
        self.closes = SessionCloses(self.session_lookups, self.session_threads, self.completed_calls)
        self.salts = TenantSalts.from_settings(settings.cache_salt_key, settings.autellix_api_keys)
        self._engines = EngineBeats()
        self._hb_sub: Subscription | None = None
        self._token_inbox = bus.nc.new_inbox()  # this process's token subjects: <inbox>.<call id>
        self._listeners: dict[str, tuple[str, asyncio.Queue]] = {}  # reply subject -> (call id, queue)
        self._tasks: set[asyncio.Task] = set()

    @classmethod
    async def connect(cls, settings: SessionApiSettings) -> Gateway:
        bus = await Bus.connect(settings.nats_url, "session_api", settings.nats_connect_timeout_s)
        gateway = cls(bus, settings)
        await bus.ensure_streams(settings.audit_max_age_s, settings.audit_max_bytes)
        gateway._hb_sub = await bus.subscribe(subjects.all_engine_heartbeats(), gateway._on_heartbeat,
                                              types=(m.EngineHeartbeat,))
        await bus.nc.subscribe(f"{gateway._token_inbox}.*", cb=gateway._on_token)
        await bus.nc.flush()  # the server has the subscription before any call is placed
        await bus.serve_health()
        await gateway.limits.start()
        await gateway.peers.start()
        await gateway.closes.start(bus)  # every close, wherever it came from, ends the cached lookup
        return gateway

    async def close(self) -> None:
        await self.limits.close()
        await self.bus.close()

    # --- engines -------------------------------------------------------------------------------
    async def _on_heartbeat(self, msg: Incoming) -> None:
        self._engines.observe(msg.body.engine_id, msg.body.started_at_ns, time.monotonic())
        self.models.observe(msg.body)

    def engine_incarnation(self, engine_id: str) -> int:
        return self._engines.incarnation(engine_id)

    def engine_is_live(self, engine_id: str) -> bool:
        return self._engines.is_live(engine_id, time.monotonic(), self.settings.engine_ttl_s)

    def engine_silent_alone(self, engine_id: str) -> bool:
        return self._engines.silent_alone(engine_id)

    def live_engines(self) -> list[str]:
        return self._engines.live(time.monotonic(), self.settings.engine_ttl_s)

    def health(self) -> dict:
        """Ready to serve: the bus is connected and some engine heartbeats (else "degraded": every
        call would fail with 503, so a load balancer should look elsewhere)."""
        connected = self.bus.nc.is_connected
        engines = self.live_engines()
        status = {"ok": connected and bool(engines), "status": "ok",
                  "nats": "connected" if connected else "disconnected", "engines": engines}
        if not connected:
            status |= {"status": "degraded", "reason": "nats disconnected"}
        elif not engines:
            status |= {"status": "degraded", "reason": "no live engine"}
        return status

    async def cancel(self, engine_id: str, call_id: str) -> None:
        try:
            await self.bus.publish(subjects.engine_commands(engine_id), m.CancelCall(call_id=call_id))
        except Exception as exc:  # best effort: the engine finishes the call and nobody listens
            log.warning("cancel_failed", call_id=call_id, engine_id=engine_id, error=str(exc))

    # --- sessions ------------------------------------------------------------------------------
    async def _session_request(self, subject: str, msg, session_id: str, if_lost: IfLost = IfLost.WAIT):
        try:
            return await self.bus.request(subject, msg, timeout_s=self.settings.nats_request_timeout_s,
                                          if_lost=if_lost, responder=PROCESS_TABLE)
        except RemoteError as exc:
            if exc.code in (ErrorCode.NOT_FOUND.value, ErrorCode.FORBIDDEN.value):
                raise session_not_found(session_id) from None  # a foreign session looks absent
            if exc.code == ErrorCode.CONFLICT.value:
                raise session_ended(session_id) from None
            if exc.code == ErrorCode.BAD_REQUEST.value:
                raise ApiError(400, exc.description, code="invalid_value") from None
            if exc.code == ErrorCode.LIMITED.value:
                raise ApiError(429, exc.description, type="rate_limit_error", code="too_many_sessions") from None
            raise unavailable(f"process table error: {exc.description}", code="process_table_error") from None
        except (NoResponders, RequestTimeout) as exc:
            raise _bus_unavailable("process_table", exc) from None

    async def open_session(self, tenant: str, name: str | None, workload_class: str | None,
                           session_id: str | None = None) -> tuple[SessionView, bool]:
        """(the session, whether this request created it). Without an id one is issued; a client's
        id opens its session, or finds it open (409 when it has ended); an issued id must exist."""
        if session_id is None:
            session_id = new_issued_id()
        else:
            try:
                existing = await self.session_info(tenant, checked(session_id, "id"))
            except ApiError as exc:
                if exc.status != 404 or is_issued(session_id):
                    raise
            else:
                if existing.state != "open":
                    raise session_ended(session_id)
                return _view(existing, session_id), False
        await self._open(tenant, session_id, name or "", workload_class or "")
        return await self.lookup_session(tenant, session_id), True

    async def _open(self, tenant: str, session_id: str, name: str = "", workload_class: str = "") -> m.SessionOpened:
        """The process table's open, idempotent on the program id: concurrent first uses all succeed."""
        return await self._session_request(subjects.session_open(), m.OpenSession(
            session_id=program_id_for(tenant, session_id), tenant=tenant, name=name, workload_class=workload_class),
            session_id, IfLost.RESEND)

    async def session_info(self, tenant: str, session_id: str, cached_ok: bool = False) -> m.SessionInfo:
        """The table's view; `cached_ok`: an open session's view from before will do (session_lookups.py)."""
        program_id = program_id_for(tenant, checked(session_id, "session_id"))

        def fetch():
            timeout_s = self.settings.nats_request_timeout_s
            return self._session_request(subjects.session_lookup(), m.LookupSession(
                session_id=program_id, tenant=tenant, deadline_ns=time.time_ns() + int(timeout_s * 1e9)), session_id,
                IfLost.RESEND)
        return await self.session_lookups.lookup(lookup_key(tenant, program_id), fetch, cached_ok,
                                                 self.completed_calls.get(program_id))

    async def lookup_session(self, tenant: str, session_id: str) -> SessionView:
        return _view(await self.session_info(tenant, session_id), session_id)

    async def close_session(self, tenant: str, session_id: str) -> SessionView:
        await self.session_info(tenant, session_id)  # 404 for unknown or foreign ids first
        program_id = program_id_for(tenant, session_id)
        await self._session_request(subjects.session_close(), m.CloseSession(session_id=program_id, tenant=tenant),
                                    session_id)
        self.closes.forget(tenant, program_id)  # as for a close heard from elsewhere
        return await self.lookup_session(tenant, session_id)

    async def _close_after_final_call(self, tenant: str, session_id: str) -> None:
        try:
            await self.close_session(tenant, session_id)
        except ApiError as exc:  # the answer is out already: nobody to tell but the log
            log.warning("final_call_close_failed", session_id=session_id, status=exc.status, error=exc.message)

    def spawn(self, coro) -> asyncio.Task:
        """A task the gateway keeps a reference to until it is done (asyncio holds only weak ones)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- calls ---------------------------------------------------------------------------------
    def reconnects(self) -> int:
        """How often the bus has reconnected to NATS (core NATS messages may be lost across one)."""
        return self.bus.nc.stats.get("reconnects", 0)

    def token_subject(self, key: str) -> str:
        """A reply subject for one placement of a call (`key`: the call id, or with a suffix for a
        re-placement); chunks published there reach this process's wildcard subscription."""
        subjects.token(key)  # one subject token: no '.', '*', '>' or spaces
        return f"{self._token_inbox}.{key}"

    async def _on_token(self, raw: Msg) -> None:
        listener = self._listeners.get(raw.subject)
        if listener is None:
            return  # a late chunk of a closed or re-placed call: nobody waits for it
        call_id, queue = listener
        try:
            body = decode(raw.data).body
        except ProtocolError as exc:
            log.warning("token_chunk_rejected", call_id=call_id, reason=str(exc))
            return
        if isinstance(body, m.TokenChunk) and body.call_id == call_id:
            queue.put_nowait(body)

    async def subscribe_tokens(self, call_id: str, reply_subject: str, queue: asyncio.Queue) -> TokenListener:
        if not reply_subject.startswith(self._token_inbox + "."):
            raise ValueError(f"reply subject {reply_subject!r} is not one of this gateway's (token_subject())")
        self._listeners[reply_subject] = (call_id, queue)
        return TokenListener(self, reply_subject)

    def stop_listening(self, reply_subject: str) -> None:
        self._listeners.pop(reply_subject, None)

    def resolve_model(self, name: str) -> ServedModel:
        served = self.models.resolve(name, self.live_engines())
        metrics.note_model(served.name)
        return served

    async def start_call(self, tenant: str, call: PreparedCall, model: str, client_streams: bool = True,
                         allow_redispatch: bool = True) -> CallStream:
        """Resolve the session, then have the router place the call on a stream whose options are
        fixed first. Errors before any token (404, 409, 429, 503) surface here, before the response starts."""
        limit_key = None if call.session_id is None else call.program_id
        await self.limits.admit(tenant, limit_key, call.session_id)
        try:
            session = await self._call_session(tenant, call)
        except BaseException:
            self.limits.release(tenant, limit_key)
            raise
        close_session = None
        if call.ends_session:
            def close_session():
                return self._close_after_final_call(tenant, call.session_id)
        stream = CallStream(self, call.call_id, StreamOptions(
            client_streams=client_streams, allow_redispatch=allow_redispatch, relay=bool(call.openai_body),
            release=lambda: self.limits.release(tenant, limit_key), close_session=close_session))
        try:  # closing the stream releases the admission
            await self._place_first(stream, tenant, call, model, *session)
        except RemoteError as exc:
            await stream.close()
            raise unavailable(f"call not placed: {exc.description}", code=exc.code) from None
        except BusError as exc:
            await stream.close()
            raise _bus_unavailable("router", exc) from None
        except BaseException:
            await stream.close()
            raise
        return stream

    async def _session_for_call(self, tenant: str, call: PreparedCall) -> tuple[str | None, int, float | None]:
        """(primary engine, opened at, expected remaining service) of the call's open session; a
        client's id opens it on first use.
        The call's thread and parent are admitted against the session's threads (session_threads.py)."""
        session_id = call.session_id
        try:
            info = await self.session_info(tenant, session_id, cached_ok=True)
        except ApiError as exc:
            if exc.status != 404 or is_issued(session_id):
                raise
            # admitted before the session is opened: a refused call leaves no session behind
            self.session_threads.admit(call.program_id, (), call.thread_id, call.parent_thread_id, session_id)
            try:
                opened = await self._open(tenant, session_id)  # 409 if it was closed meanwhile
            except ApiError:
                self.session_threads.forget(call.program_id)
                raise
            # the opening call ranks like any other: without the table's rank it would fall back to
            # least attained service, ahead of every older program's calls (a fork/join's reduce)
            return None, opened.opened_at_ns, hinted_or_learned(call.remaining_calls, opened.hint_scale_s,
                                                                opened.expected_remaining_s)
        try:
            self._admit_thread(call, info)
        except ApiError as exc:
            if exc.code != "unknown_parent_thread":
                raise
            # the parent may be newer than a cached view (placed through another worker whose note
            # was lost, then answered): the table's current view decides
            info = await self.session_info(tenant, session_id)
            self._admit_thread(call, info)
        return (info.primary_engine, info.opened_at_ns,
                hinted_or_learned(call.remaining_calls, info.hint_scale_s, info.expected_remaining_s))

    def _admit_thread(self, call: PreparedCall, info: m.SessionInfo) -> None:
        if info.state != "open":
            raise session_ended(call.session_id)
        self.completed_calls.at_least(call.program_id, info.num_completed_calls)
        self.session_threads.admit(call.program_id, info.thread_service_s, call.thread_id, call.parent_thread_id,
                                   call.session_id)

    async def _call_session(self, tenant: str, call: PreparedCall) -> tuple[str | None, int, float | None]:
        """(primary engine, program started at, expected remaining service) of the call."""
        if call.session_id is None:
            return None, time.time_ns(), None
        primary_engine, opened_at_ns, expected_remaining_s = await self._session_for_call(tenant, call)
        return primary_engine, opened_at_ns or time.time_ns(), expected_remaining_s

    async def _place_first(self, stream: CallStream, tenant: str, call: PreparedCall, model: str,
                           primary_engine: str | None, program_started_at_ns: int,
                           expected_remaining_s: float | None) -> None:
        route = m.RouteCall(
            call_id=call.call_id, program_id=call.program_id, thread_id=call.thread_id,
            parent_thread_id=call.parent_thread_id, tenant=tenant, prompt_tokens=call.prompt_tokens,
            prompt_segments=list(call.prompt_segments), max_tokens=call.max_tokens, stream=True,
            reply_subject=self.token_subject(call.call_id), submitted_at_ns=time.time_ns(), model=model,
            primary_engine=primary_engine, program_started_at_ns=program_started_at_ns,
            next_tool=call.next_tool, next_tool_idle_s=call.next_tool_idle_s,
            completed_calls_before=self.completed_calls.get(call.program_id),
            expected_remaining_s=expected_remaining_s, openai_body=call.openai_body, endpoint=call.endpoint)
        await self.bus.publish_event_unacked(m.CallSubmitted(
            call_id=call.call_id, program_id=call.program_id, thread_id=call.thread_id,
            parent_thread_id=call.parent_thread_id, tenant=tenant, prompt_tokens=call.prompt_tokens,
            max_tokens=call.max_tokens, submitted_at_ns=route.submitted_at_ns, remaining_calls=call.remaining_calls))
        await stream.place(route)
