"""The engine's side of work stealing (issue 6): a router moves a queued call away with
`CancelCall(reason="stolen")`, and the engine gives it up only while it holds no KV and has sent
no token (still pending for the next step, or waiting unadmitted in a lite engine). Otherwise the
engine answers `conflict` and keeps the call, so a call never runs, or streams, on two engines.
"""

from __future__ import annotations

from shared.engine.capabilities import Capability

STOLEN = "stolen"  # CancelCall.reason of a work-stealing move


def can_give_up(agent, call_id: str) -> bool:
    live = agent.calls.get(call_id)
    if live is None or live.started:
        return False
    stepper = agent.stepper
    if stepper.is_pending(call_id):
        return True  # not yet submitted to the engine
    engine = stepper.engine
    if Capability.GIVE_UP_QUEUED not in engine.capabilities:
        return False
    return any(seq.call_id == call_id for seq in engine.queued_unstarted())  # waiting, holding no KV
