"""An engine's messages travel on subjects that name it; the body must name the same engine.

The server lets each engine's NATS user publish only on its own subjects (heartbeat, queue
snapshot, completions: `shared/protocol/nats_roles.py`), but the body is what receivers read. A
message whose body names another engine (or program) than its subject is dropped by every
receiver (`Bus.accept`), so the subject's permission binds the body: engine e1 cannot speak for e0.
No I/O: the caller passes the subject and the decoded body (the message classes come with the codec).
"""

from __future__ import annotations

from shared.protocol import messages as m
from shared.protocol import subjects

_HB = subjects.engine_heartbeat("x")[:-1]  # <prefix>.hb.engine.
_STATE = subjects.engine_queue("x").removesuffix("x.queue")  # <prefix>.state.engine.
_COMPLETIONS = subjects.all_completions().removesuffix("*.*")  # <prefix>.completions.


def _expected(body: object) -> str | None:
    """The one subject `body` may travel on, when it is an engine's own message. Plain joins, not
    the subjects functions: the codec already refused ids that are no subject token (bounds.py),
    and this runs for every completion the table takes (~1 us instead of ~9)."""
    if isinstance(body, m.EngineHeartbeat):
        return f"{_HB}{body.engine_id}"
    if isinstance(body, m.EngineQueueSnapshot):
        return f"{_STATE}{body.engine_id}.queue"
    if isinstance(body, m.CallCompleted):
        return f"{_COMPLETIONS}{body.program_id}.{body.engine_id}"
    return None


def is_engine_subject(subject: str) -> bool:
    """An engine's own subject: its heartbeat, its queue snapshot, or one of its completions."""
    return subject.startswith((_HB, _STATE, _COMPLETIONS))


def attribution_problem(subject: str, body: object) -> str | None:
    """Why `body` may not arrive on `subject` (a phrase), or None when it may.

    On an engine subject (hb.engine.*, state.engine.*, completions.*) the body must be that
    subject's message naming the subject's engine (and program); elsewhere anything goes."""
    if not is_engine_subject(subject):
        return None
    expected = _expected(body)
    if expected is None:
        return f"{type(body).__name__} does not belong on an engine's subject"
    if expected != subject:
        return (f"the body names engine {getattr(body, 'engine_id', '?')!r}"
                + (f" and program {body.program_id!r}" if isinstance(body, m.CallCompleted) else "")
                + f": it belongs on {expected}, not {subject}")
    return None
