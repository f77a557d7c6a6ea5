"""One simulation run: programs arrive, calls are revealed as their parents finish, a router sends
each call to an engine, engines step on a virtual clock, completions update the process table.

The process table is a `DictProgramDirectory` shared by every engine (the simulator's stand-in for
the process_table service); it is updated with the same `ProgramLedger` transitions production uses.
Anti-starvation promotions are decided as production's controller decides them (`controller.py`:
the core's `PromotionPlanner` over the engines' queue snapshots) when `SimConfig.starvation` is set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loadgen.sim.controller import SimController
from loadgen.sim.events import EventKind, EventQueue
from loadgen.sim.metrics import PointOutcome, ProgramRecord, RegimeAccumulator
from loadgen.sim.program_run import ProgramRun
from loadgen.sim.size_hints import SimulatedHints
from loadgen.workloads.spec import CallSpec, ProgramSpec
from shared.core.policy import SchedulingPolicy
from shared.core.routing import RouterName, choose_engine
from shared.core.size_estimator import SizeEstimator
from shared.core.size_hints import hinted_or_learned
from shared.core.starvation import StarvationConfig
from shared.engine.api import CallCompletion, DictProgramDirectory, Engine, EngineCall

# Isolated run time of a call given its uncached prompt tokens: the SRPT oracle's estimate.
CallTimeOracle = Callable[[CallSpec, int], float]


@dataclass(frozen=True)
class SimConfig:
    policy: SchedulingPolicy
    router: RouterName = RouterName.LOCALITY
    locality_threshold_tokens: int = 2048
    # absolute virtual-time cap; a run that hits it is unstable (programs left unfinished)
    time_cap_s: float = float("inf")
    oracle: CallTimeOracle | None = None  # required for SRPT (clairvoyant, simulation only)
    # stop early (unstable) when more programs than this are in the system at once: a backlog
    # that size means the run is past saturation, and draining it only burns compute
    max_in_system: int | None = None
    # the controller's anti-starvation (production's planner, every decision interval); None: no
    # controller (an engine may still promote locally if its own StarvationConfig says so)
    starvation: StarvationConfig | None = None
    # clients' remaining-calls hints (log-sigma of their error, loadgen/sim/size_hints.py) for a
    # policy that reads expected_remaining_s; None: no client hints
    hint_sigma: float | None = None
    seed: int = 0  # draws the hints' errors


def oracle_call_times(spec: ProgramSpec, oracle: CallTimeOracle) -> list[float]:
    """Isolated run time of every call; a call's uncached part is the segments its program has
    not shown before (a warm prefix cache holds the history when the program runs alone)."""
    seen: set[str] = set()
    times = []
    for call in spec.calls:
        uncached = sum(n for seg, n in call.prompt_segments if seg not in seen)
        seen.update(seg for seg, _ in call.prompt_segments)
        times.append(oracle(call, uncached))
    return times


class Simulation:
    def __init__(self, programs: Sequence[ProgramSpec], arrivals_s: Sequence[float],
                 engines: Sequence[Engine], directory: DictProgramDirectory, config: SimConfig) -> None:
        if len(programs) != len(arrivals_s):
            raise ValueError(f"{len(programs)} programs but {len(arrivals_s)} arrival times")
        if not engines:
            raise ValueError("at least one engine is needed")
        if "oracle_remaining_s" in config.policy.inputs and config.oracle is None:
            raise ValueError(f"{config.policy.name} needs a call-time oracle")
        self._programs = programs
        self._arrivals_s = list(arrivals_s)
        self._engines = {e.engine_id: e for e in engines}
        self._engine_ids = sorted(self._engines)
        self._directory = directory
        self._config = config
        self._queue = EventQueue()
        self._busy = dict.fromkeys(self._engine_ids, False)
        self._start_pending = dict.fromkeys(self._engine_ids, False)
        self._in_flight: dict[str, tuple[ProgramRun, int, float, int]] = {}
        self._submit_seq = 0
        self._rr_index = 0
        # SERPT and Gittins learn program sizes per workload as programs finish, from nothing (no oracle)
        self._sizes = SizeEstimator() if "expected_remaining_s" in config.policy.inputs else None
        self._hints = SimulatedHints(config.hint_sigma, config.seed) \
            if self._sizes is not None and config.hint_sigma is not None else None
        self._regime = RegimeAccumulator()
        self._records: list[ProgramRecord] = []
        self._calls_per_engine = dict.fromkeys(self._engine_ids, 0)
        self._in_system = 0
        self._max_in_system_seen = 0
        self._controller = SimController(config.starvation, directory) \
            if config.starvation is not None and config.starvation.beta is not None else None
        self._round_pending = False

    def run(self) -> PointOutcome:
        for i, t in enumerate(self._arrivals_s):
            self._queue.push(t, EventKind.PROGRAM_ARRIVAL, i)
        now = 0.0
        stop = None
        limit = self._config.max_in_system
        while self._queue:
            at_s, kind, payload = self._queue.pop()
            if kind is EventKind.CONTROLLER_TICK:  # not an event of the run: no stop, no end time
                self._controller_round(at_s)
                continue
            now = at_s
            if now > self._config.time_cap_s:
                stop = "time cap"
                break
            if limit is not None and self._in_system > limit:
                stop = f"backlog over {limit} programs"
                break
            if kind is EventKind.STEP_END:
                self._end_step(payload[0], payload[1], now)
            elif kind is EventKind.CALL_READY:
                self._submit(payload[0], payload[1], now)
            elif kind is EventKind.PROGRAM_ARRIVAL:
                self._arrive(payload, now)
            else:
                self._start_step(payload, now)
        return PointOutcome(
            num_programs=len(self._programs), records=self._records, arrivals_s=self._arrivals_s,
            regime=self._regime, num_engines=len(self._engines), end_s=now, cap_hit=stop is not None,
            per_engine_calls=self._calls_per_engine, stop_reason=stop,
            max_in_system=self._max_in_system_seen,
        )

    # -- events -------------------------------------------------------------------------------

    def _controller_round(self, now: float) -> None:
        """The controller's round, every decision interval while a call waits somewhere (a round
        with nothing waiting changes nothing: idle stretches are skipped, the grid kept)."""
        self._round_pending = False
        if now > self._config.time_cap_s:
            self._round_pending = True  # no more rounds
            return
        self._regime.promotions += len(self._controller.tick(now))
        self._schedule_round(now + self._controller.decision_interval_s)

    def _schedule_round(self, now: float) -> None:
        if self._controller is not None and not self._round_pending and self._controller.has_waiting():
            self._round_pending = True
            self._queue.push(self._controller.next_round_s(now), EventKind.CONTROLLER_TICK, None)

    def _arrive(self, index: int, now: float) -> None:
        spec = self._programs[index]
        oracle = self._config.oracle if "oracle_remaining_s" in self._config.policy.inputs else None
        call_times = oracle_call_times(spec, oracle) if oracle else None
        run = ProgramRun(spec, now, call_times)
        self._in_system += 1
        self._max_in_system_seen = max(self._max_in_system_seen, self._in_system)
        for i in run.roots():
            self._ready(run, i, now)

    def _ready(self, run: ProgramRun, index: int, now: float) -> None:
        delay = run.spec.calls[index].delay_s
        run.delay_s += delay
        self._queue.push(now + delay, EventKind.CALL_READY, (run, index))

    def _submit(self, run: ProgramRun, index: int, now: float) -> None:
        spec = run.spec.calls[index]
        ledger = self._directory.ledger(run.spec.program_id)
        if spec.parent_thread_id is not None:
            ledger.fork_thread(spec.thread_id, spec.parent_thread_id)
        call = EngineCall(
            call_id=spec.call_id, program_id=run.spec.program_id, thread_id=spec.thread_id,
            prompt_segments=spec.prompt_segments, max_output_tokens=spec.output_tokens,
            arrival_s=now, program_arrival_s=run.arrival_s, seq=self._submit_seq,
            oracle_remaining_s=run.oracle_remaining_s,
            expected_remaining_s=self._expected_remaining_s(run, ledger.total_service_s),
        )
        self._submit_seq += 1
        engine_id = self._route(run, call)
        if run.primary_engine is None:
            run.primary_engine = engine_id
        self._in_flight[spec.call_id] = (run, index, ledger.thread_service(spec.thread_id), ledger.epoch)
        self._calls_per_engine[engine_id] += 1
        if self._controller is not None:
            self._controller.on_submit(engine_id, call.call_id, call.program_id, now)
            self._schedule_round(now)
        self._engines[engine_id].submit(call, now)
        self._maybe_start(engine_id, now)

    def _expected_remaining_s(self, run: ProgramRun, service_s: float) -> float | None:
        """A trusted client hint, else the learned rank (None: the policy reads no size)."""
        if self._sizes is None:
            return None
        hint, scale_s = self._hints.hint_and_scale(run) if self._hints is not None else (None, None)
        return hinted_or_learned(hint, scale_s, self._sizes.rank_s(run.spec.workload, service_s,
                                                                   self._config.policy.impl.size_rank))

    def _route(self, run: ProgramRun, call: EngineCall) -> str:
        if len(self._engine_ids) == 1:
            return self._engine_ids[0]
        loads = {eid: self._engines[eid].load() for eid in self._engine_ids}
        decision = choose_engine(
            self._config.router, loads, call.prompt_tokens, run.primary_engine, self._rr_index,
            self._config.locality_threshold_tokens,
        )
        self._rr_index += 1
        return decision.engine_id

    def _maybe_start(self, engine_id: str, now: float) -> None:
        if self._busy[engine_id] or self._start_pending[engine_id]:
            return
        if not self._engines[engine_id].has_work():
            return
        self._start_pending[engine_id] = True
        self._queue.push(now, EventKind.STEP_START, engine_id)

    def _start_step(self, engine_id: str, now: float) -> None:
        self._start_pending[engine_id] = False
        report = self._engines[engine_id].step(now)
        if report is None:
            return
        if not report.duration_s > 0:
            raise RuntimeError(f"engine {engine_id} returned a step of {report.duration_s} s")
        self._busy[engine_id] = True
        self._regime.add_step(report)
        self._queue.push(now + report.duration_s, EventKind.STEP_END, (engine_id, report))

    def _end_step(self, engine_id: str, report, now: float) -> None:
        self._busy[engine_id] = False
        if self._controller is not None:
            self._controller.on_step_end(engine_id, report, now)
            self._schedule_round(now)
        for completion in report.finished:
            self._complete(completion, now)
        self._maybe_start(engine_id, now)

    def _complete(self, c: CallCompletion, now: float) -> None:
        run, index, thread_service_at_submit_s, submit_epoch = self._in_flight.pop(c.call_id)
        ledger = self._directory.ledger(c.program_id)
        ledger.complete_call(
            c.call_id, c.thread_id, c.service_s, c.wait_s,
            thread_service_at_submit_s=thread_service_at_submit_s,
            aggregation=self._config.policy.aggregation, submit_epoch=submit_epoch,
        )
        self._regime.add_completion(c)
        run.wait_s += c.wait_s
        run.service_s += c.service_s
        run.preemptions += c.preemptions
        for child in run.finish_call(index, now):
            self._ready(run, child, now)
        if run.done:
            self._finish_program(run)

    def _finish_program(self, run: ProgramRun) -> None:
        spec = run.spec
        self._in_system -= 1
        self._records.append(ProgramRecord(
            program_id=spec.program_id, workload=spec.workload, arrival_s=run.arrival_s,
            finish_s=run.finish_s, output_tokens=spec.output_tokens, num_calls=len(spec.calls),
            wait_s=run.wait_s, service_s=run.service_s, delay_s=run.delay_s,
        ))
        if self._sizes is not None:
            self._sizes.observe(spec.workload, run.service_s)
        if self._hints is not None:
            self._hints.finished(run)
        # a finished program has no call left in any engine: drop its ledger (bounded memory)
        self._directory.ledgers.pop(spec.program_id, None)
        if self._controller is not None:
            self._controller.forget(spec.program_id)
