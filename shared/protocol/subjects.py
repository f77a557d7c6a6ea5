"""Every NATS subject, stream, consumer and queue-group name: derived here and nowhere else.

Hierarchy (`autellix.` prefix):
    cmd.router.route                  RouteCall           core, queue group "router"
    cmd.engine.<engine_id>            RunCall/CancelCall  core, one engine agent
    cmd.session.{open,close,lookup}   session requests    core request/reply, queue group "process_table"
    cmd.health.<service>              HealthCheck         core request/reply, every instance answers
    cmd.limits.{admit,usage}          AdmitCalls/LimitUsage core, every process table (the limit owner)
    state.api.peer_notes              ApiPeerNotes        core, every session_api worker (their caches)
    state.bus.reconnected             BusReconnected      core, every service (requests to it may be lost)
    tokens.<call_id>                  TokenChunk          core (the stream has its own end marker)
    hb.engine.<engine_id>             EngineHeartbeat     core (loss harmless: the next one comes)
    state.engine.<engine_id>.queue    EngineQueueSnapshot core
    state.program.<program_id>        ProgramServiceUpdated core
    state.tenants                     TenantShares        core (controller -> engines)
    events.<program_id>.<type>        lifecycle events    JetStream stream AUDIT (durable)
    completions.<program_id>.<engine_id> CallCompleted    JetStream stream COMPLETIONS (work queue)
    errors.<service>                  ErrorRaised         core

The engine's own subjects (hb, state.engine, completions) carry its id, so the server's per-engine
permissions decide who may send them; the bus drops a message whose body names another engine
(`shared/protocol/attribution.py`).

Ids used as subject tokens must not contain '.', '*', '>' or whitespace; `token()` enforces it.
"""

from __future__ import annotations

from shared.protocol import messages as m
from shared.protocol.bounds import token  # noqa: F401  (subjects.token: one rule, in bounds.py)

PREFIX = "autellix"

# Queue groups (one per service: replicas share the work)
ROUTER_QUEUE = "router"
PROCESS_TABLE_QUEUE = "process_table"
CONTROLLER_QUEUE = "controller"

# JetStream
AUDIT_STREAM = "AUTELLIX_AUDIT"
COMPLETIONS_STREAM = "AUTELLIX_COMPLETIONS"  # the process table's input: never discarded
PROCESS_TABLE_COMPLETIONS_DURABLE = "process_table_completions"
PROCESS_TABLE_PROMOTIONS_DURABLE = "process_table_promotions"
CONTROLLER_COMPLETIONS_DURABLE = "controller_completions"



# --- commands ---------------------------------------------------------------------------------
def router_route() -> str:
    return f"{PREFIX}.cmd.router.route"


def engine_commands(engine_id: str) -> str:
    return f"{PREFIX}.cmd.engine.{token(engine_id)}"


def session_open() -> str:
    return f"{PREFIX}.cmd.session.open"


def session_close() -> str:
    return f"{PREFIX}.cmd.session.close"


def session_lookup() -> str:
    return f"{PREFIX}.cmd.session.lookup"


def limits_admit() -> str:
    return f"{PREFIX}.cmd.limits.admit"


def limits_usage() -> str:
    return f"{PREFIX}.cmd.limits.usage"


def api_peer_notes() -> str:
    return f"{PREFIX}.state.api.peer_notes"


def bus_reconnected() -> str:
    return f"{PREFIX}.state.bus.reconnected"


def all_limits() -> str:
    """Both limit subjects on one subscription: a worker's messages arrive in the order sent."""
    return f"{PREFIX}.cmd.limits.*"


def health(service: str) -> str:
    return f"{PREFIX}.cmd.health.{token(service)}"


# --- core NATS streams of data ------------------------------------------------------------------
def tokens(call_id: str) -> str:
    return f"{PREFIX}.tokens.{token(call_id)}"


def engine_heartbeat(engine_id: str) -> str:
    return f"{PREFIX}.hb.engine.{token(engine_id)}"


def all_engine_heartbeats() -> str:
    return f"{PREFIX}.hb.engine.*"


def engine_queue(engine_id: str) -> str:
    return f"{PREFIX}.state.engine.{token(engine_id)}.queue"


def all_engine_queues() -> str:
    return f"{PREFIX}.state.engine.*.queue"


def tenant_shares() -> str:
    return f"{PREFIX}.state.tenants"


def program_service(program_id: str) -> str:
    return f"{PREFIX}.state.program.{token(program_id)}"


def all_program_services() -> str:
    return f"{PREFIX}.state.program.*"


def errors(service: str) -> str:
    return f"{PREFIX}.errors.{token(service)}"


def all_errors() -> str:
    return f"{PREFIX}.errors.*"


# --- lifecycle events (JetStream AUDIT stream) ----------------------------------------------------
def _events_root() -> str:
    return f"{PREFIX}.events"


def event_type_subject(event_type: type) -> str:
    """The per-type tail of an event subject: the message type name, e.g. 'call.completed'."""
    if event_type not in m.AUDIT_EVENT_TYPES:
        raise ValueError(f"{event_type.__name__} is not an audit event type")
    return event_type.TYPE


def event(msg: object) -> str:
    """Subject of one lifecycle event: events.<program_id>.<type> (session id == program id)."""
    program_id = getattr(msg, "program_id", None) or getattr(msg, "session_id", None)
    if program_id is None:
        raise ValueError(f"{type(msg).__name__} has no program_id or session_id")
    return f"{_events_root()}.{token(program_id)}.{event_type_subject(type(msg))}"


def events_of_type(event_type: type) -> str:
    """All programs' events of one type, e.g. the process table's durable consumer filter."""
    return f"{_events_root()}.*.{event_type_subject(event_type)}"


def events_of_program(program_id: str) -> str:
    return f"{_events_root()}.{token(program_id)}.>"


def all_events() -> str:
    return f"{_events_root()}.>"


def is_command(subject: str) -> bool:
    """A command subject (a service is asked to do something): what a trace follows."""
    return subject.startswith(f"{PREFIX}.cmd.")


def is_event(subject: str) -> bool:
    """A lifecycle-event subject: published to JetStream, whose ack inbox rides as the reply."""
    return subject.startswith(f"{_events_root()}.")


# --- call completions (JetStream COMPLETIONS stream) ---------------------------------------------
def completion(program_id: str, engine_id: str) -> str:
    """Where `engine_id` publishes a completion of `program_id`'s call (the engine is named so that
    only that engine's NATS user may publish it)."""
    return f"{PREFIX}.completions.{token(program_id)}.{token(engine_id)}"


def engine_completions(engine_id: str) -> str:
    return f"{PREFIX}.completions.*.{token(engine_id)}"


def all_completions() -> str:
    return f"{PREFIX}.completions.*.*"


def consumer_next(stream: str, durable: str) -> str:
    """JetStream API: pull the next messages of a durable consumer."""
    return f"$JS.API.CONSUMER.MSG.NEXT.{token(stream)}.{token(durable)}"


def inbox_prefix() -> str:
    return f"_INBOX.{PREFIX}"
