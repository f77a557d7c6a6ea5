"""Name the session (and thread) of every call an agent makes, without touching each call site.

    from autellix import client

    llm = openai.OpenAI(base_url=..., api_key=..., http_client=client.http_client())
    with client.session("ticket-4711"):              # your own id; the API opens it on first use
        llm.chat.completions.create(...)             # X-Session-Id: ticket-4711
        with client.thread("search"):                # X-Thread-Id: search (a fork of the thread
            llm.chat.completions.create(...)         #  around it, when there is one)
        with client.final():                         # X-Session-Final: true: the API closes the
            llm.chat.completions.create(...)         #  session once this answer is over

    with client.session("ticket-4712", remaining_calls=12):  # the agent's plan: 12 LLM calls
        llm.chat.completions.create(...)             # X-Remaining-Calls: 12, then 11, 10, ...

A size hint (`remaining_calls`) counts down by one per request sent inside the session, and stops
once the plan is used up (a hint of fewer calls than are still to come would be a wrong one). The ids
and the count live in context variables, so each asyncio task and thread sees its own; an httpx event
hook (`add_headers`, or `add_headers_async` for an `httpx.AsyncClient`) copies them onto every
request that does not set those headers itself. `http_client()` / `async_http_client()` build a
client with the hook in place, for `openai.OpenAI(http_client=...)`, LangChain's `ChatOpenAI`
(`http_client` / `http_async_client`), the OpenAI Agents SDK's `AsyncOpenAI`, or any httpx user.

Imports only httpx and the standard library (openai's client defaults are used when installed).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

import httpx

SESSION_HEADER = "X-Session-Id"
THREAD_HEADER = "X-Thread-Id"
PARENT_THREAD_HEADER = "X-Parent-Thread-Id"
FINAL_HEADER = "X-Session-Final"
REMAINING_CALLS_HEADER = "X-Remaining-Calls"

_session: ContextVar[str | None] = ContextVar("autellix_session", default=None)
_thread: ContextVar[tuple[str, str | None] | None] = ContextVar("autellix_thread", default=None)
_final: ContextVar[bool] = ContextVar("autellix_final", default=False)


class _Plan:
    """The calls a session still makes: one count shared by every task and thread inside it."""

    def __init__(self, calls: int) -> None:
        if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
            raise ValueError(f"remaining_calls must be a whole number >= 1, got {calls!r}")
        self._left = calls
        self._lock = threading.Lock()

    def take(self) -> int | None:
        """The hint for the request being sent (this one included); None once the plan is used up."""
        with self._lock:
            if self._left < 1:
                return None
            self._left -= 1
            return self._left + 1


_plan: ContextVar[_Plan | None] = ContextVar("autellix_plan", default=None)


@contextlib.contextmanager
def _set(var: ContextVar, value) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


@contextlib.contextmanager
def session(session_id: str | None = None, remaining_calls: int | None = None) -> Iterator[str]:
    """Calls inside belong to session `session_id` (a fresh random id when None); yields the id.
    `remaining_calls`: how many LLM calls the session makes, sent as a size hint that counts down."""
    plan = _Plan(remaining_calls) if remaining_calls is not None else None
    session_id = session_id or str(uuid.uuid4())
    with _set(_session, session_id), _set(_thread, None), _set(_plan, plan):
        yield session_id


@contextlib.contextmanager
def thread(thread_id: str, parent: str | None = None) -> Iterator[str]:
    """Calls inside run on thread `thread_id`, forked from `parent` (default: the enclosing thread)."""
    enclosing = _thread.get()
    if parent is None and enclosing is not None:
        parent = enclosing[0]
    with _set(_thread, (thread_id, parent)):
        yield thread_id


@contextlib.contextmanager
def final() -> Iterator[None]:
    """The calls inside are the session's last: the API closes it once the answer is over."""
    with _set(_final, True):
        yield


def headers() -> dict[str, str]:
    """The headers the current context adds to a request (the size hint aside: `add_headers`)."""
    out: dict[str, str] = {}
    session_id = _session.get()
    if session_id is not None:
        out[SESSION_HEADER] = session_id
        if _final.get():
            out[FINAL_HEADER] = "true"
    current = _thread.get()
    if current is not None:
        out[THREAD_HEADER] = current[0]
        if current[1] is not None:
            out[PARENT_THREAD_HEADER] = current[1]
    return out


def add_headers(request: httpx.Request) -> None:
    """httpx event hook (`event_hooks={"request": [add_headers]}`); a header set per call wins.
    A request of the context's session also takes the plan's next size hint (a request that names
    another session takes none, and uses none up)."""
    ours = headers()
    for name, value in ours.items():
        request.headers.setdefault(name, value)
    plan = _plan.get()
    if plan is not None and request.headers.get(SESSION_HEADER) == ours.get(SESSION_HEADER):
        left = plan.take()
        if left is not None:
            request.headers.setdefault(REMAINING_CALLS_HEADER, str(left))


async def add_headers_async(request: httpx.Request) -> None:
    """The same hook for an `httpx.AsyncClient` (whose hooks must be coroutines)."""
    add_headers(request)


def _with_hook(kwargs: dict, hook) -> dict:
    hooks = dict(kwargs.pop("event_hooks", None) or {})
    hooks["request"] = [*hooks.get("request", ()), hook]
    return {**kwargs, "event_hooks": hooks}


def http_client(**kwargs) -> httpx.Client:
    """An httpx client with the hook; openai's `DefaultHttpxClient` (its timeouts and limits) if
    openai is installed. Keyword arguments go to the client."""
    try:
        from openai import DefaultHttpxClient as client_type
    except ImportError:
        client_type = httpx.Client
    return client_type(**_with_hook(kwargs, add_headers))


def async_http_client(**kwargs) -> httpx.AsyncClient:
    """`http_client` for asyncio: for `openai.AsyncOpenAI(http_client=...)`."""
    try:
        from openai import DefaultAsyncHttpxClient as client_type
    except ImportError:
        client_type = httpx.AsyncClient
    return client_type(**_with_hook(kwargs, add_headers_async))
