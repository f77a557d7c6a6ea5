"""The engine's side of work stealing (issue 6): a router moves a queued call away with
`CancelCall(reason="stolen")`, and the engine gives it up only while it holds no KV and has sent
no token (still pending for the next step, or waiting unadmitted in a lite engine). Otherwise the
engine answers `conflict` and keeps the call, so a call never runs, or streams, on two engines.
"""

from __future__ import annotations

STOLEN = "stolen"  # CancelCall.reason of a work-stealing move


def can_give_up(agent, call_id: str) -> bool:
    live = agent.calls.get(call_id)
    if live is None or live.started:
        return False
    stepper = agent.stepper
    if any(c.call_id == call_id for c in getattr(stepper, "_pending", ())):
        return True  # not yet submitted to the engine
    queued = getattr(stepper.engine, "queued_unstarted", None)  # lite: waiting, holding no KV
    if queued is None:
        return False
    return any(seq.call_id == call_id for seq in queued())
