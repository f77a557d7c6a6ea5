"""The engine agent forgets a program when its session closes or expires.

The process table announces both on the audit stream (`SessionClosed`, reason "client" or
"idle_ttl"); the agent hears it as a plain core subscriber (at most once: a missed close leaves
the program to the directory's and the update subscriptions' LRU bounds). One-call programs need no event: the
directory drops them when their only call completes here.
"""

from __future__ import annotations

from services.engine_agent.program_updates import ProgramUpdates
from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.engine.capabilities import Capability, Capable
from shared.engine.program_directory import CachedProgramDirectory
from shared.protocol import messages as m
from shared.protocol import subjects


class ProgramForgetter:
    def __init__(self, directory: CachedProgramDirectory, engine: Capable, updates: ProgramUpdates) -> None:
        self.directory = directory
        self.updates = updates
        # the lite engine (and a real engine's agent) keeps per-session state; others may not
        self._forget_in_engine = (engine.forget_session if Capability.FORGET_SESSIONS in engine.capabilities
                                  else None)
        self.num_forgotten = 0

    def forget(self, program_id: str) -> None:
        self.directory.close(program_id)
        self.updates.drop(program_id)
        if self._forget_in_engine is not None:
            self._forget_in_engine(program_id)
        self.num_forgotten += 1

    async def on_session_closed(self, msg: Incoming) -> None:
        closed: m.SessionClosed = msg.body
        self.forget(closed.session_id)


async def subscribe_forgetting(bus: Bus, directory: CachedProgramDirectory, engine: Capable,
                               updates: ProgramUpdates) -> ProgramForgetter:
    forgetter = ProgramForgetter(directory, engine, updates)
    await bus.subscribe(subjects.events_of_type(m.SessionClosed), forgetter.on_session_closed,
                        types=(m.SessionClosed,))
    return forgetter
