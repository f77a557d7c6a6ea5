"""The router forgets a program's primary engine when its session closes or expires.

The process table announces both on the audit stream (`SessionClosed`, reason "client" or
"idle_ttl"); the router hears it as a plain core subscriber (at most once: a missed close leaves
the program to the chooser's LRU bound, the backstop). So the primary-engine map tracks open
sessions. One-call programs are never remembered (decision.py), so they need no event.
"""

from __future__ import annotations

from services.router.decision import EngineChooser
from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.protocol import messages as m
from shared.protocol import subjects


class SessionForgetter:
    def __init__(self, chooser: EngineChooser) -> None:
        self.chooser = chooser
        self.num_forgotten = 0

    async def on_session_closed(self, msg: Incoming) -> None:
        closed: m.SessionClosed = msg.body
        self.chooser.forget_program(closed.session_id)
        self.num_forgotten += 1


async def subscribe_forgetting(bus: Bus, chooser: EngineChooser) -> SessionForgetter:
    forgetter = SessionForgetter(chooser)
    await bus.subscribe(subjects.events_of_type(m.SessionClosed), forgetter.on_session_closed,
                        types=(m.SessionClosed,))
    return forgetter
