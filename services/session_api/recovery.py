"""Re-placement of a lost call, the parts that are not rules (those are in stream_machine.py): the
client's opt-out header and the route of a new placement.

Each placement streams on its own reply subject (`<inbox>.<call id>-r<n>`), so late chunks of a
lost placement never mix with the new one's; the lost engine may have been the program's primary
one, so the router chooses afresh.
"""

from __future__ import annotations

import dataclasses

from fastapi import Request

from shared.protocol import messages as m

REDISPATCH_HEADER = "x-autellix-redispatch"
_OPT_OUT = {"off", "no", "never", "false", "0"}


def allows_redispatch(request: Request) -> bool:
    """False when the client sent `X-Autellix-Redispatch: off` (it then gets the 503 at once)."""
    return request.headers.get(REDISPATCH_HEADER, "").strip().lower() not in _OPT_OUT


def replacement(route: m.RouteCall, reply_subject: str) -> m.RouteCall:
    return dataclasses.replace(route, primary_engine=None, reply_subject=reply_subject)
