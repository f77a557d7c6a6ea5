"""Program ids the mesh gives meaning to.

A call sent without a session is a one-call program named `call-<call id>` (the session API names
it so): once that call completed, no service needs the program again, so every per-program cache
can forget it at once. Sessions are named by the process table's caller (`s-<hex>` through the API).
"""

from __future__ import annotations

ONE_CALL_PREFIX = "call-"


def one_call_program_id(call_id: str) -> str:
    return f"{ONE_CALL_PREFIX}{call_id}"


def is_one_call_program(program_id: str) -> bool:
    return program_id.startswith(ONE_CALL_PREFIX)
