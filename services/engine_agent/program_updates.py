"""An engine agent hears the process table's updates of the programs it holds calls of, only.

The table publishes each program's update on that program's own subject. An agent subscribes to
a program's subject when the program's first call reaches it, and drops the subscription when the
session closes or when more than `capacity` other programs have had calls here since (LRU), so
NATS delivers an engine the updates of its own programs, not every program's in the cluster.

An engine that takes a program's call for the first time has missed the updates published before
it subscribed. If the client had seen calls of the program complete (`completed_calls_before`
above 0, as the API counts them), the agent asks the table for the program's committed state once the subscription is in
place (so no update falls between the two), and takes it unless an update or a local completion
has already brought more. The call does not wait for that answer: until it comes, the call is
ordered on what this engine knew, as before. A program seen with 0 completed calls (or sent with
no count) starts empty here, which it is unless a parallel call completed on another engine in the moment before the
subscription reached NATS; the next update of the program then brings it.

One-call programs need none of this: their only update follows their only completion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from shared.bus.bus import Bus
from shared.bus.errors import BusError
from shared.bus.incoming import Incoming
from shared.bus.lost_requests import IfLost
from shared.engine.program_directory import CachedProgramDirectory
from shared.logging import get_logger
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ProtocolError
from shared.protocol.nats_roles import PROCESS_TABLE
from shared.protocol.programs import is_one_call_program
from shared.tasks import cancel_and_wait

UpdateTaker = Callable[[m.ProgramServiceUpdated], Awaitable[None]]


def update_from_info(info: m.SessionInfo) -> m.ProgramServiceUpdated:
    """The table's lookup answer as the update it would have published."""
    return m.ProgramServiceUpdated(
        program_id=info.session_id, service_s=info.service_s, wait_s=info.wait_s, epoch=info.epoch,
        thread_service_s=dict(info.thread_service_s), num_completed_calls=info.num_completed_calls,
        updated_at_ns=time.time_ns())


class ProgramUpdates:
    def __init__(self, bus: Bus, directory: CachedProgramDirectory, take_update: UpdateTaker,
                 capacity: int = 8192, lookup_timeout_s: float = 2.0) -> None:
        self.bus = bus
        self.directory = directory
        self.take_update = take_update
        self.lookup_timeout_s = lookup_timeout_s
        self._subscriptions: LRU[str, object] = LRU(capacity)
        self._tasks: set[asyncio.Task] = set()
        self.num_subscribed = 0
        self.num_fetched = 0  # committed states taken from the table's answer
        self.num_fetch_failed = 0
        self.log = get_logger()

    def __contains__(self, program_id: object) -> bool:
        return program_id in self._subscriptions

    def __len__(self) -> int:
        return len(self._subscriptions)

    async def hold(self, route: m.RouteCall) -> None:
        """A call of `route.program_id` reached this engine: hear its program's updates from now."""
        program_id = route.program_id
        if is_one_call_program(program_id):
            return
        if self._subscriptions.touch(program_id) is not None:
            return
        sub = await self.bus.subscribe(subjects.program_service(program_id), self._on_update,
                                       types=(m.ProgramServiceUpdated,))
        self.num_subscribed += 1
        for evicted_id, evicted in self._subscriptions.put(program_id, sub):
            self._unsubscribe(evicted_id, evicted)
        if route.completed_calls_before:  # None: the sender counts no order (not the API)
            task = asyncio.create_task(self._fetch(program_id, route.tenant))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def drop(self, program_id: str) -> None:
        """The program's session closed: its updates are no longer needed here."""
        sub = self._subscriptions.pop(program_id, None)
        if sub is not None:
            self._unsubscribe(program_id, sub)

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)

    async def _on_update(self, msg: Incoming) -> None:
        await self.take_update(msg.body)

    async def _fetch(self, program_id: str, tenant: str) -> None:
        try:
            await self.bus.flush(self.lookup_timeout_s)  # NATS has the subscription: no update is missed
            info = await self.bus.request(
                subjects.session_lookup(),
                m.LookupSession(session_id=program_id, tenant=tenant,
                                deadline_ns=time.time_ns() + int(self.lookup_timeout_s * 1e9)),
                timeout_s=self.lookup_timeout_s, if_lost=IfLost.RESEND, responder=PROCESS_TABLE)
        except (BusError, ProtocolError) as exc:  # the next update of the program brings its state instead
            self.num_fetch_failed += 1
            self.log.warning("program_state_fetch_failed", program_id=program_id, error=str(exc))
            return
        if not isinstance(info, m.SessionInfo) or info.state != "open" or info.num_completed_calls < self.directory.num_completed(program_id):
            return  # closed, or what this view holds is already newer
        self.num_fetched += 1
        await self.take_update(update_from_info(info))

    def _unsubscribe(self, program_id: str, sub) -> None:
        task = asyncio.create_task(sub.unsubscribe())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
