"""The router's decision: a thin stateful wrapper over the pure `shared.core.routing.choose_engine`.

State kept here (never in the core): the round-robin cursor and the program -> primary engine map
this replica has learned (a call's own `primary_engine` hint, from the process table, wins). The
map tracks open sessions: a closed or expired session is forgotten (forget.py), one-call programs
are never entered, and the LRU bound (`primary_capacity`) is the backstop for a missed close.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.router.engine_table import EngineTable
from shared.core.routing import RouteDecision, RouterName, choose_engine
from shared.lru import LRU
from shared.protocol.programs import is_one_call_program


class NoEngineError(Exception):
    """No live engine: the caller should retry later."""


@dataclass(frozen=True)
class RouteRequest:
    program_id: str
    prompt_tokens: int
    max_output_tokens: int
    primary_engine: str | None  # from the process table, when the caller knows it


class EngineChooser:
    def __init__(self, table: EngineTable, router: RouterName, locality_threshold_tokens: int,
                 primary_capacity: int = 100_000) -> None:
        self.table = table
        self.router = router
        self.locality_threshold_tokens = locality_threshold_tokens
        self._rr_index = 0
        self._primary: LRU[str, str] = LRU(primary_capacity)  # program -> engine

    def primary_engine(self, program_id: str) -> str | None:
        return self._primary.get(program_id)

    def choose(self, req: RouteRequest, now_s: float) -> RouteDecision:
        loads = self.table.loads(now_s)
        if not loads:
            raise NoEngineError("no live engine; retry shortly")
        primary = req.primary_engine or self._primary.get(req.program_id)
        decision = choose_engine(self.router, loads, req.prompt_tokens, primary, self._rr_index,
                                 self.locality_threshold_tokens)
        self._rr_index += 1
        # the first engine a program runs on holds its KV: it stays the primary while it lives;
        # a one-call program has no next call, so it is not remembered
        if (primary is None or primary not in loads) and not is_one_call_program(req.program_id):
            self._primary.put(req.program_id, decision.engine_id)
        self.table.add_load(decision.engine_id, req.prompt_tokens + req.max_output_tokens)
        return decision

    def forget_program(self, program_id: str) -> None:
        self._primary.pop(program_id, None)

    @property
    def num_programs(self) -> int:
        """Programs remembered (for tests and health)."""
        return len(self._primary)
