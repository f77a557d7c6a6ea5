"""Connecting to NATS with a bounded first attempt and logged reconnects.

nats-py retries a dead server for max_reconnect_attempts * reconnect_time_wait (120 s by default)
inside `connect()`; here the whole first connect is bounded by `connect_timeout_s`, after which
reconnects (once connected) go on forever with a short wait, and every transition is logged.

A connection that authenticates as a user (nats://user:password@host) takes `_INBOX.<user>` as
its inbox prefix: the server lets each role read only its own inbox (shared/protocol/nats_roles.py),
so replies and token streams stay with the role that asked for them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from urllib.parse import unquote, urlsplit, urlunsplit

import nats
from nats.aio.client import Client

from shared.bus.errors import ConnectFailed
from shared.bus.reconnect import ServerPicker
from shared.logging import get_logger

RECONNECT_WAIT_S = 0.5
# A server behind a cut link sends nothing, not even a reset: only unanswered pings tell. nats-py's
# default (a ping every 2 min, 2 outstanding) left services on a partitioned cluster node stuck for
# a minute and more (loadgen/multihost); 1 s and 2 move them to another node within about 3 s, and
# still ride out a 2 s stall of the event loop.
PING_INTERVAL_S = 1
MAX_OUTSTANDING_PINGS = 2
# one server's TCP connect and handshake: a reconnect tries the servers in turn, and each one
# behind a cut link costs this much
SERVER_CONNECT_TIMEOUT_S = 2.0
DEFAULT_INBOX_PREFIX = "_INBOX"
_SUBJECT_SAFE = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")


def url_user(url: str) -> str:
    """The user named in the first server URL ('' when none)."""
    return urlsplit(url.split(",")[0].strip()).username or ""


def inbox_prefix(url: str) -> str:
    # a role ("router") or an engine's user ("engine_agent.gpu-node-3"): tokens of [A-Za-z0-9_-]
    user = url_user(url)
    return f"{DEFAULT_INBOX_PREFIX}.{user}" if user and _SUBJECT_SAFE.fullmatch(user) else DEFAULT_INBOX_PREFIX


def split_credentials(url: str) -> tuple[list[str], dict[str, str]]:
    """The server list without user:password, and them as connect options (when every server
    names the same). A cluster tells its clients its other nodes' addresses (without credentials);
    credentials given as options apply to those too, while ones inside URLs would not: a reconnect
    to a learned address was refused (Authorization Violation)."""
    parts = [urlsplit(s.strip()) for s in url.split(",")]
    users = {(p.username, p.password) for p in parts}
    if len(users) != 1 or None in next(iter(users)):
        return [s.strip() for s in url.split(",")], {}
    user, password = next(iter(users))
    bare = [urlunsplit(p._replace(netloc=p.netloc.rpartition("@")[2])) for p in parts]
    return bare, {"user": unquote(user), "password": unquote(password)}


def is_permission_violation(exc: Exception) -> bool:
    return "permissions violation" in str(exc).lower()


def redact_url(url: str) -> str:
    """A server URL (or comma list) fit for logs: a password or token in it becomes '***'."""
    out = []
    for server in url.split(","):
        parts = urlsplit(server.strip())
        if parts.username is None and parts.password is None:
            out.append(server.strip())
            continue
        host = parts.netloc.rpartition("@")[2]
        userinfo = f"{parts.username}:***" if parts.password is not None else "***"  # a lone token is secret
        out.append(urlunsplit(parts._replace(netloc=f"{userinfo}@{host}")))
    return ",".join(out)


async def connect_nats(url: str, name: str, connect_timeout_s: float = 5.0,
                       on_reconnect: Callable[[], None] | None = None) -> Client:
    # credentials ride in the URL (nats://user:password@host): never in a log line
    log = get_logger(nats_url=redact_url(url), client=name)
    first_attempt_done = False

    async def on_error(exc: Exception) -> None:
        if is_permission_violation(exc):  # the server refused a publish or subscribe of this role
            log.error("nats_permission_denied", error=str(exc), user=url_user(url))
            return
        if first_attempt_done:  # during the first connect this fires per failed try: too noisy
            log.warning("nats_error", error=f"{type(exc).__name__}: {exc}")

    async def on_disconnected() -> None:
        if first_attempt_done and not nc.is_closed:  # closing on purpose is not news
            log.warning("nats_disconnected")

    async def on_reconnected() -> None:
        picker.connected(nc.connected_url.netloc if nc.connected_url else "")
        log.info("nats_reconnected", server=str(nc.connected_url.netloc if nc.connected_url else ""))
        if on_reconnect is not None:
            on_reconnect()

    async def on_closed() -> None:
        if first_attempt_done:
            log.info("nats_closed")

    nc = Client()
    picker = ServerPicker(RECONNECT_WAIT_S)  # a reconnect tries the other servers before the one lost
    servers, credentials = split_credentials(url)
    try:
        await asyncio.wait_for(nc.connect(
            servers=servers,
            **credentials,
            name=name,
            inbox_prefix=inbox_prefix(url),
            connect_timeout=min(connect_timeout_s, SERVER_CONNECT_TIMEOUT_S),
            reconnect_time_wait=RECONNECT_WAIT_S,
            reconnect_to_server_handler=picker,
            ping_interval=PING_INTERVAL_S,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS,
            max_reconnect_attempts=-1,
            allow_reconnect=True,
            error_cb=on_error,
            disconnected_cb=on_disconnected,
            reconnected_cb=on_reconnected,
            closed_cb=on_closed,
        ), timeout=connect_timeout_s)
    except (TimeoutError, OSError, nats.errors.Error) as exc:
        try:
            await nc.close()
        except Exception:  # already half-closed; nothing else to release
            pass
        raise ConnectFailed(f"cannot connect to NATS at {redact_url(url)} within {connect_timeout_s:g} s "
                            f"({type(exc).__name__}: {exc})") from None
    first_attempt_done = True
    picker.connected(nc.connected_url.netloc if nc.connected_url else "")
    log.info("nats_connected")
    return nc
