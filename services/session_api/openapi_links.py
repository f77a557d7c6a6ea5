"""OpenAPI `links` between the session operations: how a client goes from one answer to the next
request (open a session -> call in it -> read it -> close it). Clients and stateful fuzzers
(schemathesis) follow them; the operation ids are FastAPI's defaults for the routes."""

from __future__ import annotations

READ = "read_session_v1_sessions__session_id__get"
CLOSE = "close_session_v1_sessions__session_id__delete"
CALLS = {"Chat": "chat_completions_v1_chat_completions_post", "Completion": "completions_v1_completions_post",
         "Response": "responses_v1_responses_post"}


def _by_id(operation_id: str, id_expression: str, description: str) -> dict:
    return {"operationId": operation_id, "parameters": {"path.session_id": id_expression},
            "description": description}


def _call_in(id_expression: str) -> dict:
    return {f"{name}InSession": {"operationId": op, "requestBody": {"session_id": id_expression},
                                 "description": f"a {name.lower()} call in this session (body `session_id`)"}
            for name, op in CALLS.items()}


def read_view() -> dict:
    return {"ReadSession": _by_id(READ, "$response.body#/id", "this session as the process table has it")}


def from_session_view() -> dict:
    """Links from a `SessionView` just read (its id is `id`): close it, or call in it."""
    return {"CloseSession": _by_id(CLOSE, "$response.body#/id", "end this session"), **_call_in("$response.body#/id")}


def from_opened_view() -> dict:
    """Links from a session just opened: read it too."""
    return {**read_view(), **from_session_view()}


def from_call() -> dict:
    """Links from a call's answer (its body names the session as `session_id`)."""
    return {"ReadSession": _by_id(READ, "$response.body#/session_id", "the session the call was charged to"),
            "CloseSession": _by_id(CLOSE, "$response.body#/session_id", "end the call's session")}
