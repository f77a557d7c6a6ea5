"""What the mesh listens on, as concrete subjects to send to, and who may publish where.

The listening subjects are every service role's subscribe permissions (shared/protocol/nats_roles.py;
the engine role's are each live engine's own user's), each wildcard filled with the tokens a live stack uses (its engines, a victim session), so a
forgery reaches the consumers that would act on it. Each subject carries the message types its
consumers take, so valid-looking forgeries can be built for it. Inboxes are left out: a reply
inbox's subject is the client library's random token, not something a consumer listens on by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.codec import MESSAGE_TYPES
from shared.protocol.nats_roles import (
    CLI,
    CONTROLLER,
    ENGINE_AGENT,
    OWNED_DURABLES,
    PERMISSIONS,
    PROCESS_TABLE,
    ROUTER,
    SERVICE_ROLES,
    SESSION_API,
    engine_permissions,
    engine_user,
    permissions_of,
)

P = subjects.PREFIX


@dataclass(frozen=True)
class Target:
    subject: str  # concrete
    pattern: str  # the subscribe permission it came from
    types: tuple[type, ...]  # what its consumers decode
    consumers: tuple[str, ...]  # the roles that subscribe it


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS wildcard match: `*` one token, `>` one or more trailing tokens."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


def may_publish(user: str, subject: str) -> bool:
    """Whether the server lets `user` (a role, or an engine's user) publish `subject` (allow list
    minus deny list)."""
    perms = permissions_of(user)
    return (any(subject_matches(p, subject) for p in perms.publish)
            and not any(subject_matches(p, subject) for p in perms.publish_deny))


# subscribe permission (after the prefix) -> the message types its consumers decode, by name, so a
# message another change adds is picked up once named here; an unknown subscription is still fuzzed
# with raw bytes (its Target has no types, and the report lists it)
_TYPES_BY_PATTERN = {
    "cmd.router.route": ("RouteCall",), "cmd.engine.*": ("RunCall", "CancelCall"),
    "cmd.session.open": ("OpenSession",), "cmd.session.close": ("CloseSession",),
    "cmd.session.lookup": ("LookupSession",), "cmd.limits.*": ("AdmitCalls", "LimitUsage"),
    "hb.engine.*": ("EngineHeartbeat",), "state.engine.*.queue": ("EngineQueueSnapshot",),
    "state.program.*": ("ProgramServiceUpdated",), "state.tenants": ("TenantShares",),
    "completions.*.*": ("CallCompleted",),
}


def _types_of(pattern: str, engines: list[str]) -> tuple[type, ...]:
    tail = pattern.removeprefix(f"{P}.")
    parts = tail.split(".")
    if len(parts) == 3 and parts[1] == "engine" and parts[2] in engines:  # an engine's own: cmd.engine.e0
        tail = f"{parts[0]}.engine.*"
    if tail.startswith("events.*."):
        names: tuple[str, ...] = (MESSAGE_TYPES[tail.removeprefix("events.*.")].__name__,)
    elif tail.startswith("cmd.health."):
        names = ("HealthCheck",)
    else:
        names = _TYPES_BY_PATTERN.get(tail, ())
    return tuple(getattr(m, name) for name in names if hasattr(m, name))


def _fill(pattern: str, engines: list[str], program_id: str) -> list[str]:
    """Concrete subjects for one pattern: live engines (and one that is not), the victim program."""
    if pattern.endswith(".>"):
        raise ValueError(f"{pattern!r}: a '>' subscription outside an inbox has no concrete subject here")
    if "*" not in pattern:
        return [pattern]
    if pattern == subjects.all_completions():  # a completion names its program and its engine
        return [subjects.completion(program_id, e) for e in [*engines, "e-fuzz"]]
    if ".engine.*" in pattern:
        return [pattern.replace("*", e, 1) for e in [*engines, "e-fuzz"]]
    if pattern == f"{P}.cmd.limits.*":  # the limit owner's two commands
        return [pattern.replace("*", verb, 1) for verb in ("admit", "usage")]
    return [pattern.replace("*", program_id, 1)]


# what the durable (JetStream pull) consumers read: their filter subjects, one per owned durable
DURABLE_INPUTS = {PROCESS_TABLE: (subjects.all_completions(), subjects.events_of_type(m.ProgramPromoted))}


def listening_patterns(engines: list[str]) -> dict[str, tuple[str, ...]]:
    """Every subscribe permission of the service roles (each engine's own user for the engine
    role; inboxes aside) and every durable consumer's filter -> the roles that consume it."""
    for role, durables in OWNED_DURABLES.items():
        if len(DURABLE_INPUTS.get(role, ())) != len(durables):
            raise KeyError(f"{role}'s durable consumers changed: list their filter subjects in DURABLE_INPUTS")
    out: dict[str, list[str]] = {}
    for role, filters in DURABLE_INPUTS.items():
        for pattern in filters:
            out.setdefault(pattern, []).append(role)
    for role in SERVICE_ROLES:
        perms = [engine_permissions(e) for e in engines] if role == ENGINE_AGENT else [PERMISSIONS[role]]
        for pattern in dict.fromkeys(p for perm in perms for p in perm.subscribe):
            if pattern.startswith("_INBOX."):
                continue
            out.setdefault(pattern, []).append(role)
    return {p: tuple(roles) for p, roles in out.items()}


def mesh_targets(engines: list[str], program_id: str) -> list[Target]:
    """One target per concrete subject (an engine's own hb.engine.e0 and the API's hb.engine.*
    meet there: one target, both consumers)."""
    out: dict[str, Target] = {}
    for pattern, roles in sorted(listening_patterns(engines).items()):
        for subject in _fill(pattern, engines, program_id):
            seen = out.get(subject)
            consumers = (*seen.consumers, *roles) if seen else roles
            out[subject] = Target(subject, seen.pattern if seen else pattern, _types_of(pattern, engines),
                                  tuple(dict.fromkeys(consumers)))
    return list(out.values())


def forger_users(engines: list[str]) -> tuple[str, ...]:
    """The connections a forger can hold: every service role (each engine's own user: e0's may
    not speak for e1), and the read-only CLI role."""
    return (SESSION_API, ROUTER, *(engine_user(e) for e in engines), PROCESS_TABLE, CONTROLLER, CLI)
