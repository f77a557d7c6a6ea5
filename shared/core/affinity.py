"""Session affinity with work stealing (SAGA section 5): decisions only, the router applies them.

A session's calls go to the engine that holds its KV (its *pin*). An engine idle for `t_idle_s`
steals queued sessions from the busiest engine whose load is at least `r_max` times its own; a moved
session is re-pinned with a new *epoch*, and a request routed under an older epoch is rejected on
arrival (the router re-routes it), so a call can never run on two engines. A session migrates at
most `max_migrations_per_task` times. Three guards against oscillation (migration takes longer than
`t_idle_s`): the load-ratio guard, the epoch (a pin moves once per plan) and the migration bound.

Loads are whatever comparable work figure the router keeps (queued + running tokens, predicted
seconds); a queued session's `load` is its share of its engine's load.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class AffinityConfig:
    t_idle_s: float = 0.1  # an engine idle this long may steal
    r_max: float = 2.0  # steal only from an engine with load >= r_max x the thief's
    max_migrations_per_task: int = 3  # SAGA saw ~2.3 per task on average, 5 at most
    max_steals_per_engine: int = 1  # sessions one idle engine takes per plan (one epoch)

    def __post_init__(self) -> None:
        if self.t_idle_s < 0 or self.r_max < 1 or self.max_migrations_per_task < 0 or self.max_steals_per_engine < 0:
            raise ValueError("need t_idle_s >= 0, r_max >= 1, max_migrations_per_task >= 0, "
                             "max_steals_per_engine >= 0")


@dataclass(frozen=True)
class Pin:
    engine_id: str
    epoch: int  # bumped on every re-pin; requests carry the epoch they were routed under
    migrations: int = 0  # times this session was stolen


@dataclass(frozen=True)
class AffinityRoute:
    engine_id: str
    pin: Pin  # the session's pin after this call (unchanged when it stuck)
    reason: str


def route_with_affinity(session_id: str, pin: Pin | None, engine_loads: Mapping[str, float]) -> AffinityRoute:
    """The pinned engine while it is live; otherwise the least-loaded one (ties: lowest id), pinned
    with a new epoch (a pin to a dead engine does not count as a migration)."""
    if not engine_loads:
        raise ValueError("no live engine to route to")
    if pin is not None and pin.engine_id in engine_loads:
        return AffinityRoute(pin.engine_id, pin, f"affinity: session {session_id} pinned (epoch {pin.epoch})")
    best = min(engine_loads, key=lambda e: (engine_loads[e], e))
    if pin is None:
        return AffinityRoute(best, Pin(best, 0), f"new session: least-loaded, load {engine_loads[best]:.3g}")
    return AffinityRoute(best, Pin(best, pin.epoch + 1, pin.migrations),
                         f"pinned engine {pin.engine_id} gone: re-pinned to least-loaded {best}")


@dataclass(frozen=True)
class RequestCheck:
    accept: bool
    reason: str


def check_request_epoch(request_epoch: int, pin: Pin | None, engine_id: str) -> RequestCheck:
    """At the engine on arrival: a request routed under an old pin (or to another engine) is stale."""
    if pin is None:
        return RequestCheck(True, "no pin: first call")
    if pin.engine_id != engine_id:
        return RequestCheck(False, f"stale: session pinned to {pin.engine_id}, not {engine_id}")
    if request_epoch < pin.epoch:
        return RequestCheck(False, f"stale: epoch {request_epoch} < pin epoch {pin.epoch}")
    return RequestCheck(True, f"epoch {request_epoch} current")


@dataclass(frozen=True)
class QueuedSession:
    session_id: str
    load: float  # this session's queued work, in the engines' load unit
    pin: Pin
    kv_blocks: int = 0  # KV it holds where it is: cheaper to move when small


@dataclass(frozen=True)
class Migration:
    session_id: str
    from_engine: str
    to_engine: str
    new_pin: Pin
    reason: str


@dataclass(frozen=True)
class StealPlan:
    migrations: tuple[Migration, ...]
    engine_loads: Mapping[str, float]  # loads after the plan, for the caller's bookkeeping

    @property
    def new_pins(self) -> dict[str, Pin]:
        return {m.session_id: m.new_pin for m in self.migrations}


def plan_steals(engine_loads: Mapping[str, float], engine_idle_s: Mapping[str, float],
                queued_sessions_by_engine: Mapping[str, Sequence[QueuedSession]],
                cfg: AffinityConfig | None = None) -> StealPlan:
    """Which queued sessions idle engines take this epoch.

    Thieves: engines idle >= t_idle_s, longest idle first (ties: id). Each takes from the engine
    with the highest current load satisfying load >= r_max x its own and a session that would see
    less work ahead of it on the thief (thief load < victim load - session load), cheapest to move
    first (fewest KV blocks, then fewest migrations, then queue order). A session moves at most
    once per plan and never beyond the migration bound; within one plan an engine either gives or
    receives, never both (no ping-pong).
    """
    cfg = cfg or AffinityConfig()
    loads = dict(engine_loads)
    queues = {e: list(qs) for e, qs in queued_sessions_by_engine.items() if e in loads}
    thieves = sorted((e for e in loads if engine_idle_s.get(e, 0.0) >= cfg.t_idle_s),
                     key=lambda e: (-engine_idle_s[e], e))
    receivers: set[str] = set()
    givers: set[str] = set()
    moved: set[str] = set()
    migrations: list[Migration] = []
    for thief in thieves:
        if thief in givers:
            continue
        for _ in range(cfg.max_steals_per_engine):
            pick = _pick_steal(thief, loads, queues, receivers, moved, cfg)
            if pick is None:
                break
            victim, session = pick
            queues[victim].remove(session)
            loads[victim] -= session.load
            loads[thief] += session.load
            new_pin = Pin(thief, session.pin.epoch + 1, session.pin.migrations + 1)
            migrations.append(Migration(session.session_id, victim, thief, new_pin,
                                        f"{thief} idle {engine_idle_s[thief]:.3g}s stole from {victim} "
                                        f"(load {loads[victim] + session.load:.3g} >= {cfg.r_max:g} x "
                                        f"{loads[thief] - session.load:.3g})"))
            receivers.add(thief)
            givers.add(victim)
            moved.add(session.session_id)
    return StealPlan(tuple(migrations), loads)


def _pick_steal(thief: str, loads: dict[str, float], queues: dict[str, list[QueuedSession]],
                receivers: set[str], moved: set[str], cfg: AffinityConfig) -> tuple[str, QueuedSession] | None:
    own = loads[thief]
    victims = sorted((e for e in queues if e != thief and e not in receivers
                      and loads[e] > own and loads[e] >= cfg.r_max * own),
                     key=lambda e: (-loads[e], e))
    for victim in victims:
        candidates = [(s.kv_blocks, s.pin.migrations, i, s) for i, s in enumerate(queues[victim])
                      if s.session_id not in moved and s.pin.migrations < cfg.max_migrations_per_task
                      and s.load >= 0 and own < loads[victim] - s.load]
        if candidates:
            return victim, min(candidates, key=lambda t: t[:3])[3]
    return None
