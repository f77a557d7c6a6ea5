"""Session affinity in the live router (issue 6, `ROUTER_AFFINITY=true`): a session's calls go to
the engine that holds its KV, through the pure core's `route_with_affinity`.

State kept here (never in the core): each session's pin (engine, epoch, migrations), LRU bounded.
A new or orphaned session (its engine left the table) goes to the least-loaded live engine and is
pinned there; a one-call program (no session) is routed the same way and not remembered. The
process table's `primary_engine` seeds the pin of a session this replica has not seen (another
router replica placed it), so replicas agree on where a session's KV lives.

Work stealing (`plan_steals`, `AffinityConfig`: T_idle, R_max, the migration bound) runs beside it
in services/router/stealing.py and re-pins the sessions it moves (`repin`).
"""

from __future__ import annotations

from services.router.decision import EngineChooser, NoEngineError, RouteRequest
from services.router.engine_table import EngineTable
from shared.core.affinity import AffinityConfig, Pin, route_with_affinity
from shared.core.routing import RouteDecision, RouterName
from shared.lru import LRU
from shared.protocol.programs import is_one_call_program


class AffinityChooser(EngineChooser):
    def __init__(self, table: EngineTable, config: AffinityConfig, pin_capacity: int = 100_000) -> None:
        super().__init__(table, RouterName.LEAST_LOADED, locality_threshold_tokens=0, primary_capacity=pin_capacity)
        self.config = config
        self._pins: LRU[str, Pin] = LRU(pin_capacity)  # session -> pin
        self.num_repins = 0  # pins moved because their engine left

    def pin_of(self, program_id: str) -> Pin | None:
        return self._pins.get(program_id)

    def primary_engine(self, program_id: str) -> str | None:
        pin = self._pins.get(program_id)
        return None if pin is None else pin.engine_id

    def choose(self, req: RouteRequest, now_s: float) -> RouteDecision:
        loads = self.table.loads(now_s)
        if not loads:
            raise NoEngineError("no live engine; retry shortly")
        pin = self._pins.get(req.program_id)
        if pin is None and req.primary_engine is not None:
            pin = Pin(req.primary_engine, 0)  # placed by another replica: its KV is there
        route = route_with_affinity(req.program_id, pin, loads)
        if not is_one_call_program(req.program_id):
            if pin is not None and route.pin.engine_id != pin.engine_id:
                self.num_repins += 1
            self._pins.put(req.program_id, route.pin)
        self.table.add_load(route.engine_id, req.prompt_tokens + req.max_output_tokens)
        return RouteDecision(route.engine_id, route.reason)

    def repin(self, program_id: str, pin: Pin) -> None:
        """A work-stealing move: the session's KV (and its next calls) live on `pin.engine_id` now."""
        self._pins.put(program_id, pin)

    def forget_program(self, program_id: str) -> None:
        self._pins.pop(program_id, None)


def make_chooser(settings) -> EngineChooser:
    """The router's chooser from its settings (RouterSettings)."""
    table = EngineTable(settings.engine_ttl_s)
    if settings.router_affinity:
        return AffinityChooser(table, AffinityConfig(
            t_idle_s=settings.affinity_t_idle_s, r_max=settings.affinity_r_max,
            max_migrations_per_task=settings.affinity_max_migrations_per_task))
    return EngineChooser(table, settings.router_policy, settings.locality_threshold_tokens)
