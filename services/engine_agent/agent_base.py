"""What every engine agent holds toward the mesh, whatever serves its calls: its ids, the program
directory with its per-program update feed, the completion publisher and the ends it resends after
a reconnect, the tenant shares, and whether it drains. Backends add how calls run."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

from services.engine_agent.completions import CompletionPublisher
from services.engine_agent.forget import subscribe_forgetting
from services.engine_agent.program_updates import ProgramUpdates
from services.engine_agent.resend import RecentEnds
from services.engine_agent.state_loop import serve_health
from services.engine_agent.tenant_share import EngineTenantShare
from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.core.policy import SchedulingPolicy
from shared.engine.capabilities import Capable
from shared.engine.program_directory import CachedProgramDirectory
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects


class AgentBase(ABC):
    def __init__(self, bus: Bus, engine_id: str, backend: str, policy: SchedulingPolicy,
                 directory: CachedProgramDirectory, model_name: str) -> None:
        self.bus = bus
        self.engine_id = engine_id
        self.backend = backend
        self.policy = policy
        self.directory = directory
        self.model_name = model_name  # what clients send as `model`
        self.started_at_ns = time.time_ns()
        self.log = get_logger(engine_id=engine_id)
        self.completions = CompletionPublisher(bus, self.log)
        self.recent_ends = RecentEnds()  # sent again after a reconnect (resend.py)
        self.num_completed = 0
        self.draining = False  # drain.py: new calls are refused, held ones run to their end
        self.tenant_share = EngineTenantShare()
        self.program_updates = ProgramUpdates(bus, directory, self.take_update)  # its own programs' only

    async def listen(self, forgets: Capable) -> None:
        """Subscribe to its commands, the tenant shares and session closes (which `forgets` hears
        too), and answer health checks; its programs' updates (promotions included: the table's
        state with the new epoch) come per program."""
        await self.bus.subscribe(subjects.engine_commands(self.engine_id), self.on_command,
                                 types=(m.RunCall, m.CancelCall))
        await self.bus.subscribe(subjects.tenant_shares(), self.on_tenant_shares, types=(m.TenantShares,))
        await subscribe_forgetting(self.bus, self.directory, forgets, self.program_updates)
        await serve_health(self.bus, self)

    @abstractmethod
    async def on_command(self, msg: Incoming) -> m.OkReply | m.ErrorReply | None:
        ...

    @abstractmethod
    async def on_tenant_shares(self, msg: Incoming) -> None:
        ...

    async def take_update(self, u: m.ProgramServiceUpdated) -> None:
        """The process table's state of one of its programs (published, or fetched on a late join)."""
        held = self.directory.get(u.program_id)
        epoch_before = None if held is None else held.epoch
        if self.directory.apply_update(u.program_id, u.service_s, u.wait_s, u.thread_service_s, u.epoch,
                                       u.num_completed_calls):
            promoted = epoch_before is not None and u.epoch > epoch_before
            if promoted:
                self.log.info("program_promoted", program_id=u.program_id, epoch=u.epoch)
            self.took_update(u, promoted)

    @abstractmethod
    def took_update(self, u: m.ProgramServiceUpdated, promoted: bool) -> None:
        """The directory took `u`; `promoted`: it carried a promotion this engine had not seen."""

    @abstractmethod
    def heartbeat(self, interval_s: float) -> m.EngineHeartbeat:
        ...

    @abstractmethod
    def queue_snapshot(self) -> m.EngineQueueSnapshot:
        ...

    async def _send_state(self, interval_s: float, snapshot: bool) -> None:
        """The heartbeat (the router's load table) and, when asked, the queue snapshot (the controller's)."""
        await self.bus.publish(subjects.engine_heartbeat(self.engine_id), self.heartbeat(interval_s))
        if snapshot:
            await self.bus.publish(subjects.engine_queue(self.engine_id), self.queue_snapshot())
