"""Who may publish and subscribe what on NATS: one row per role of the mesh.

Each service role connects as its own NATS user (`runtime/nats_auth.py` makes the
passwords and renders the server configuration from this table). The server refuses anything not
listed (a permissions violation), so a process holding one role's password cannot forge another
role's messages:

- only engines publish heartbeats, queue snapshots and call completions (both the completions
  stream's and the audit copy) and the token chunks; each engine logs in as its own user,
  `engine_agent.<engine id>` (`engine_user`), whose heartbeat, queue-snapshot and completion
  subjects carry its id and read only its own commands: every receiver drops a message whose body
  names another engine than its subject (`shared/protocol/attribution.py`), so the server's
  permission on the subject binds the body too;
- only the process table publishes program-service updates and session events, and only it may
  change stream limits;
- only the controller publishes promotions and tenant shares; only the router places calls on engines' behalf of
  the API (the API also cancels);
- request replies go through `allow_responses` (a responder may answer what it was asked, once),
  and every role's inbox is `_INBOX.<role>.>`, readable by that role alone: a token stream (the
  API's inbox) cannot be read by anyone else;
- nobody but `admin` may purge or delete a stream or its messages, or delete a consumer.

`cli` is the read-only role of `autellix events tail`, `autellix top` and the supervisor's health
checks; `admin` (no limits) is for operators and the test fixtures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.protocol import messages as m
from shared.protocol import subjects

ADMIN = "admin"
CLI = "cli"
SESSION_API = "session_api"
ROUTER = "router"
ENGINE_AGENT = "engine_agent"
PROCESS_TABLE = "process_table"
CONTROLLER = "controller"
SERVICE_ROLES = (SESSION_API, ROUTER, ENGINE_AGENT, PROCESS_TABLE, CONTROLLER)
# the users of fixed name; engine agents log in as `engine_user(engine_id)`, one user per engine
ROLES = (SESSION_API, ROUTER, PROCESS_TABLE, CONTROLLER, CLI, ADMIN)

P = subjects.PREFIX
JS = "$JS.API"
AUDIT = subjects.AUDIT_STREAM
COMPLETIONS = subjects.COMPLETIONS_STREAM
STREAMS = (AUDIT, COMPLETIONS)
# the durable consumers only their owner may create, pull from or acknowledge
OWNED_DURABLES = {
    PROCESS_TABLE: ((COMPLETIONS, subjects.PROCESS_TABLE_COMPLETIONS_DURABLE),
                    (AUDIT, subjects.PROCESS_TABLE_PROMOTIONS_DURABLE)),
}


def inbox(role: str) -> str:
    """The inbox prefix of a role's (or a user's) connections (nats-py's `inbox_prefix`)."""
    return f"_INBOX.{role}"


def engine_user(engine_id: str) -> str:
    """The NATS user of one engine agent: `engine_agent.<id>` (its inbox is `_INBOX.engine_agent.<id>`)."""
    return f"{ENGINE_AGENT}.{subjects.token(engine_id)}"


def engine_of_user(user: str) -> str | None:
    """The engine id of an engine agent's user, None for any other user."""
    role, dot, engine_id = user.partition(".")
    return engine_id if role == ENGINE_AGENT and dot and engine_id else None


def _events(*types: type) -> list[str]:
    return [f"{P}.events.*.{t.TYPE}" for t in types]


def _create_streams() -> list[str]:
    # any service may create the streams (whoever starts first); only the owner changes them
    return [f"{JS}.STREAM.CREATE.{s}" for s in STREAMS] + [f"{JS}.STREAM.INFO.{s}" for s in STREAMS]


def _own_durables(role: str) -> list[str]:
    out = []
    for stream, durable in OWNED_DURABLES.get(role, ()):
        out += [f"{JS}.CONSUMER.DURABLE.CREATE.{stream}.{durable}", f"{JS}.CONSUMER.CREATE.{stream}.{durable}.>",
                f"{JS}.CONSUMER.INFO.{stream}.{durable}", f"{JS}.CONSUMER.MSG.NEXT.{stream}.{durable}",
                f"$JS.ACK.{stream}.{durable}.>"]
    return out


@dataclass(frozen=True)
class Permissions:
    publish: list[str]
    subscribe: list[str]
    publish_deny: list[str] = field(default_factory=list)
    responses: bool = True  # may answer requests it received (allow_responses)


def _service(role: str, publish: list[str], subscribe: list[str], user: str = "") -> Permissions:
    return Permissions(
        # health(role): the container's own health probe asks its service (docker/healthcheck.py);
        # bus_reconnected: every service says when its connection was replaced, and hears the others
        publish=[*publish, subjects.errors(role), subjects.health(role), subjects.bus_reconnected(),
                 *_create_streams(), *_own_durables(role)],
        subscribe=[*subscribe, f"{inbox(user or role)}.>", subjects.health(role), subjects.bus_reconnected()])


def _others_durables() -> list[str]:
    out = []
    for pairs in OWNED_DURABLES.values():
        for stream, durable in pairs:
            out += [f"{JS}.CONSUMER.CREATE.{stream}.{durable}", f"{JS}.CONSUMER.CREATE.{stream}.{durable}.>",
                    f"{JS}.CONSUMER.MSG.NEXT.{stream}.{durable}"]
    return out


PERMISSIONS: dict[str, Permissions] = {
    SESSION_API: _service(SESSION_API, publish=[
        subjects.router_route(), f"{P}.cmd.engine.*", subjects.session_open(), subjects.session_close(),
        subjects.session_lookup(), subjects.limits_admit(), subjects.limits_usage(), subjects.api_peer_notes(),
        *_events(m.CallSubmitted)],
        # closes: every one ends the session's cached lookup (services/session_api/session_closes.py)
        subscribe=[subjects.all_engine_heartbeats(), subjects.api_peer_notes(), *_events(m.SessionClosed)]),
    ROUTER: _service(ROUTER, publish=[f"{P}.cmd.engine.*", *_events(m.CallRouted)], subscribe=[
        subjects.router_route(), subjects.all_engine_heartbeats(),
        *_events(m.CallStarted, m.CallCompleted, m.SessionClosed)]),
    PROCESS_TABLE: _service(PROCESS_TABLE, publish=[
        subjects.all_program_services(), *_events(m.SessionOpened, m.SessionClosed),
        *[f"{JS}.STREAM.UPDATE.{s}" for s in STREAMS]],
        subscribe=[subjects.session_open(), subjects.session_close(), subjects.session_lookup(),
                   subjects.all_limits(), *_events(m.CallSubmitted)]),  # calls in flight: idle expiry waits for them
    CONTROLLER: _service(CONTROLLER, publish=[*_events(m.ProgramPromoted), subjects.tenant_shares()], subscribe=[
        subjects.all_engine_queues(), subjects.all_program_services(), *_events(m.SessionClosed)]),
    # read-only: health requests, its own ephemeral, unacknowledged readers of the audit stream
    CLI: Permissions(
        publish=[f"{P}.cmd.health.*", *[f"{JS}.STREAM.INFO.{s}" for s in STREAMS],
                 f"{JS}.CONSUMER.CREATE.{AUDIT}.*", f"{JS}.CONSUMER.CREATE.{AUDIT}.*.>",
                 f"{JS}.CONSUMER.INFO.{AUDIT}.*", f"{JS}.CONSUMER.MSG.NEXT.{AUDIT}.*"],
        publish_deny=_others_durables(),
        subscribe=[f"{P}.hb.>", f"{P}.state.>", f"{P}.events.>", f"{P}.errors.>", f"{inbox(CLI)}.>"],
        responses=False),
}


def engine_permissions(engine_id: str) -> Permissions:
    """One engine's user: its own heartbeat, queue snapshot, completions and commands only."""
    return _service(ENGINE_AGENT, publish=[
        subjects.engine_heartbeat(engine_id), subjects.engine_queue(engine_id), subjects.engine_completions(engine_id),
        # the audit events' subjects name the program, not the engine: any engine may send them
        *_events(m.CallStarted, m.CallPreempted, m.CallCompleted),
        subjects.session_lookup(),  # the state of a program whose first call here comes late in it
        f"{inbox(SESSION_API)}.>"],  # token chunks go to the API's inbox
        subscribe=[subjects.engine_commands(engine_id), subjects.all_program_services(),
                   subjects.engine_heartbeat(engine_id),  # the duplicate-id check, the container's probe
                   subjects.tenant_shares(), *_events(m.SessionClosed)],  # a promotion comes as the table's update
        user=engine_user(engine_id))


def permissions_of(user: str) -> Permissions | None:
    """A user's permissions; None for admin (no limits). KeyError for a user of no role."""
    if user == ADMIN:
        return None
    engine_id = engine_of_user(user)
    return engine_permissions(engine_id) if engine_id is not None else PERMISSIONS[user]
