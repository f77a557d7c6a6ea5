"""ATLAS arithmetic audited against the pure core: replay `ProgramLedger` over a program's call rows.

Two replays per program (promoted programs are skipped: a promotion resets the ledger by design):

- as recorded: each call with the thread service its engine saw at submit (`thread_service_at_submit_s`)
  and its submit epoch, forks from the `threads` table, in completion order: what the process table
  folds, had it applied the completions in that order. A call's own contribution (base + service)
  does not depend on the order; a forked thread's floor (its parent's s_T when the table first saw
  the thread) does. So each stored s_T must lie between the thread's own maximum (base + service
  over its calls) and that maximum raised to its parent's final s_T; the critical path (max s_T)
  and, for a critical-path program, S_p must equal the max of the stored s_T. A call that recorded
  no base (its engine's view lacked completions the client had seen; the table took its own base)
  raises the upper bound to the thread's causal value below. Outside those bounds
  is an arithmetic error of the table: service lost or counted twice (`mismatches`). Inside them
  but off the completion-order replay (`order_dependent`): a fork floored by a parent whose earlier
  completion the table applied later (a completion re-published after a fault), reported.
- causal: the same rows in completion order with no recorded base, so each call's base is the
  thread's service from the rows completed before it (a forked thread starts from its parent's).
  A recorded base below that one is a stale read (the program's state had not reached the engine
  yet); counted and summed, not an error: the call is charged on a shorter critical path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shared.core.program import ProgramLedger, ServiceAggregation


@dataclass
class AtlasCheck:
    programs_checked: int = 0
    forked_programs_checked: int = 0
    threads_checked: int = 0
    mismatches: int = 0  # programs whose stored s_T, critical path or S_p no application order explains
    order_dependent: int = 0  # programs whose stored s_T differ from the completion-order replay only
    stale_base_calls: int = 0  # calls whose engine saw less thread service than the causal replay
    stale_base_total_s: float = 0.0
    critical_path_shortfall_max_s: float = 0.0  # causal critical path minus the stored one, worst program
    details: list[str] = field(default_factory=list)

    def report(self) -> dict:
        return {"programs_checked": self.programs_checked, "forked_programs_checked": self.forked_programs_checked,
                "threads_checked": self.threads_checked, "mismatches": self.mismatches,
                "order_dependent": self.order_dependent,
                "stale_base_calls": self.stale_base_calls, "stale_base_total_s": round(self.stale_base_total_s, 6),
                "critical_path_shortfall_max_s": round(self.critical_path_shortfall_max_s, 6),
                "details": self.details[:20]}


def _replay(program_id: str, rows: list, parents: dict[str, str | None], aggregation: ServiceAggregation,
            recorded: bool) -> tuple[ProgramLedger, float, int]:
    """The ledger after the rows; with recorded=False also the stale bases (total s, count)."""
    led = ProgramLedger(program_id)
    stale_s, stale_n = 0.0, 0
    for c in rows:
        parent = parents.get(c.thread_id)
        if parent is not None and c.thread_id not in led.thread_service_s:
            led.fork_thread(c.thread_id, parent)
        if recorded:
            led.complete_call(c.call_id, c.thread_id, c.service_s, c.wait_s, c.thread_service_at_submit_s,
                              aggregation, c.submit_epoch)
            continue
        base = led.thread_service(c.thread_id)
        seen = c.thread_service_at_submit_s
        if seen is not None and seen < base - 1e-9:
            stale_s += base - seen
            stale_n += 1
        led.complete_call(c.call_id, c.thread_id, c.service_s, c.wait_s, None, aggregation, None)
    return led, stale_s, stale_n


def _own_maxima(rows: list) -> tuple[dict[str, float], set[str]]:
    """Per thread, max over its calls of recorded base + service (a missing base counts 0), and
    the threads with a call that recorded no base (its engine's view was behind: the table took
    its own base when it applied the call)."""
    own: dict[str, float] = {}
    unbased: set[str] = set()
    for c in rows:
        base = c.thread_service_at_submit_s
        if base is None:
            unbased.add(c.thread_id)
            base = 0.0
        own[c.thread_id] = max(own.get(c.thread_id, 0.0), base + c.service_s)
    return own, unbased


def _row_summary(c) -> str:
    base = "-" if c.thread_service_at_submit_s is None else f"{c.thread_service_at_submit_s:.3f}"
    return f"{c.call_id[-6:]}@{getattr(c, 'engine_id', '?')} {c.thread_id} base {base} +{c.service_s:.3f}"


def check_atlas(programs: list, calls: list, threads: list, forked: set[str] | frozenset[str],
                tolerance_s: float) -> AtlasCheck:
    """`programs`: (id, aggregation, service_s, promotions, ...) rows; `calls`: call rows with thread_id,
    service_s, wait_s, thread_service_at_submit_s, submit_epoch, completed_at; `threads`: threads rows."""
    check = AtlasCheck()
    rows_of: dict[str, list] = {}
    for c in calls:
        rows_of.setdefault(c.program_id, []).append(c)
    stored_threads: dict[str, dict[str, float]] = {}
    parents: dict[str, dict[str, str | None]] = {}
    for t in threads:
        stored_threads.setdefault(t.program_id, {})[t.thread_id] = t.service_s
        parents.setdefault(t.program_id, {})[t.thread_id] = t.parent_thread_id
    for p in programs:
        if p.promotions:
            continue
        rows = sorted(rows_of.get(p.id, []), key=lambda c: (c.completed_at is None, c.completed_at, c.call_id))
        aggregation = ServiceAggregation(p.aggregation)
        led, _, _ = _replay(p.id, rows, parents.get(p.id, {}), aggregation, recorded=True)
        check.programs_checked += 1
        check.forked_programs_checked += p.id in forked
        stored = stored_threads.get(p.id, {})
        check.threads_checked += len(stored)
        tol = tolerance_s * max(1, len(rows))
        own, unbased = _own_maxima(rows)
        causal, stale_s, stale_n = _replay(p.id, rows, parents.get(p.id, {}), aggregation, recorded=False)
        program_parents = parents.get(p.id, {})
        problems, reordered = [], []
        for t, v in sorted(led.thread_service_s.items()):
            got = stored.get(t, 0.0)
            if math.isclose(got, v, abs_tol=tol):
                continue
            low = own.get(t)
            parent = program_parents.get(t)
            high = max(low, stored.get(parent, 0.0)) if low is not None and parent is not None else low
            if t in unbased and low is not None:  # the table's own base: at most what completed before
                high = max(high, causal.thread_service(t))
            if low is not None and low - tol <= got <= high + tol:
                reordered.append(f"s_T[{t}] {got:.6f} (completion order {v:.6f}, bounds {low:.6f}..{high:.6f})")
            else:
                problems.append(f"s_T[{t}] {got:.6f} != {v:.6f}")
        stored_path = max(stored.values(), default=0.0)
        if aggregation is ServiceAggregation.CRITICAL_PATH and not math.isclose(p.service_s, stored_path, abs_tol=tol):
            problems.append(f"S_p {p.service_s:.6f} != critical path {stored_path:.6f}")
        if problems:
            check.mismatches += 1
            check.details.append(f"{p.id}: " + "; ".join(problems + reordered) + "; rows in completion order: "
                                 + ", ".join(_row_summary(c) for c in rows))
        elif reordered:
            check.order_dependent += 1
            check.details.append(f"{p.id} (order): " + "; ".join(reordered))
        check.stale_base_calls += stale_n
        check.stale_base_total_s += stale_s
        shortfall = max(causal.thread_service_s.values(), default=0.0) - stored_path
        check.critical_path_shortfall_max_s = max(check.critical_path_shortfall_max_s, shortfall)
    return check
