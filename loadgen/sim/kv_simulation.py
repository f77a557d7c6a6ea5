"""A simulation run with issue 6's mechanisms: session hints for KV retention, session affinity
with work stealing, and Agent Fair Share epochs. It extends `Simulation` (the event loop, the
process table and the program runs stay the base's) through its hooks only.

- Session = program. Each call's hint comes from its program's spec, i.e. what a client could
  declare: the tool it runs next (the next call's `CallSpec.tool`, the X-Next-Tool of the live
  API), the tokens the previous tool's observation added, and whether the session closes.
- Affinity (`route_with_affinity`) replaces the base router; every `steal_interval_s` (100 ms)
  `plan_steals` sees each engine's load, how long it has been idle (no call queued or running,
  sampled at the ticks) and its queued sessions; a stolen session's queued calls are aborted on the
  victim, submitted to the thief, and its retained KV on the victim is released.
- AFS: every `epoch_s` the tenants are ranked (`rank_tenants` with decayed service counters and
  a non-clairvoyant `WorkEstimator` fed by finished tasks) and every engine re-keys with
  `fair_share_key(rank, policy key)`. With `hold_admissions` (modes `afs-hold`, `afs-hold-open`) the controller
  also holds the new calls of the tenants `admission_holds` names for that epoch (they are
  submitted, in ready order, at the first epoch that does not hold their tenant).
Periodic work rides on the event heap as a STEP_START event with a `_Tick` payload (the base loop
dispatches STEP_START to `_start_step`, which this class intercepts), so the base file is untouched.

Recompute accounting (per call, from its completion): prefill tokens computed = prompt - prefix
hits + tokens recomputed after preemptions; recomputed = the part of the prompt the session had
already computed (the longest segment prefix shared with the parent call's prompt + output, in
whole blocks of computed KV) that missed the cache, plus the preemption recomputes. `recompute_share` = recomputed / computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from loadgen.sim.events import EventKind
from loadgen.sim.program_run import ProgramRun
from loadgen.sim.simulator import SimConfig, Simulation
from loadgen.workloads.spec import ProgramSpec
from shared.core.affinity import (
    AffinityConfig,
    Pin,
    QueuedSession,
    check_request_epoch,
    plan_steals,
    route_with_affinity,
)
from shared.core.fairness import (
    FairnessConfig,
    OpenTask,
    TenantSpec,
    WorkEstimator,
    admission_holds,
    at_risk_tasks,
    decayed_service_s,
    rank_tenants,
)
from shared.engine.api import CallCompletion, DictProgramDirectory, EngineCall, output_segment_id
from shared.engine.lite import LiteEngine
from shared.engine.lite.retention import SessionHint


@dataclass(frozen=True)
class CallFacts:
    hint: SessionHint
    reusable_tokens: int  # prompt prefix (segment-wise) the session computed in its parent call


def call_facts(programs: Sequence[ProgramSpec], block_size: int) -> dict[str, CallFacts]:
    """Hints and reusable prefix per call. The reusable prefix is counted in whole blocks of the
    parent's computed KV (its last output token has none), the most a prefix cache can hit."""
    out: dict[str, CallFacts] = {}
    for prog in programs:
        by_id = {c.call_id: c for c in prog.calls}
        children: dict[str, list[str]] = {}
        for c in prog.calls:
            for dep in c.depends_on:
                children.setdefault(dep, []).append(c.call_id)
        for c in prog.calls:
            kids = children.get(c.call_id, [])
            next_tool = by_id[kids[0]].tool if kids else None
            reusable = obs = 0
            if c.depends_on:
                parent = by_id[c.depends_on[0]]
                parent_ctx = parent.prompt_segments + ((output_segment_id(parent.call_id), parent.output_tokens),)
                for a, b in zip(c.prompt_segments, parent_ctx, strict=False):
                    if a != b:
                        break
                    reusable += a[1]
                parent_tokens = parent.prompt_tokens + parent.output_tokens
                reusable = min(reusable, parent_tokens - 1, c.prompt_tokens - 1) // block_size * block_size
                seen = set(parent_ctx)
                obs = sum(n for seg in c.prompt_segments if seg not in seen for n in (seg[1],))
            out[c.call_id] = CallFacts(SessionHint(prog.program_id, next_tool, obs, not kids), reusable)
    return out


@dataclass(frozen=True)
class FairnessOptions:
    tenants: tuple[TenantSpec, ...]
    epoch_s: float = 0.5  # controller epoch: ranks change only here
    half_life_s: float = 30.0  # of the recent-service counters (the entitlement gate)
    config: FairnessConfig = field(default_factory=FairnessConfig)
    hold_admissions: bool = False  # AFS's capacity lever: hold over-entitled tenants' new calls
    # which tasks of a tenant ahead trigger holds: "at-risk" (remaining work > time left) or "open"
    # (any open task: the lever at full strength, an upper bound on what admission holds can do)
    hold_when: str = "at-risk"


@dataclass(frozen=True)
class KvSimOptions:
    affinity: AffinityConfig | None = None  # None: the base router (SimConfig.router)
    steal_interval_s: float = 0.1
    fairness: FairnessOptions | None = None


class _Tick:
    """Payload of the periodic event (stealing plan, fairness epoch)."""


_TICK = _Tick()


class KvSimulation(Simulation):
    def __init__(self, programs: Sequence[ProgramSpec], arrivals_s: Sequence[float], engines: Sequence[LiteEngine],
                 directory: DictProgramDirectory, config: SimConfig, options: KvSimOptions) -> None:
        super().__init__(programs, arrivals_s, engines, directory, config)
        self.options = options
        self._facts = call_facts(programs, engines[0].block_size)
        facts = self._facts
        for e in engines:
            e.session_hints = lambda call, f=facts: f[call.call_id].hint
        self._lite = {e.engine_id: e for e in engines}
        self.tenant_of = {p.program_id: p.tenant for p in programs}
        self._num_programs = len(programs)
        self._finished = 0
        self._open: dict[str, ProgramRun] = {}
        self._pins: dict[str, Pin] = {}
        self._idle_since: dict[str, float | None] = dict.fromkeys(self._engine_ids)
        self.tct_s: dict[str, float] = {}  # program -> task completion time
        self.engine_of_call: dict[str, str] = {}  # where each call was routed (last, after steals)
        self.prefill_tokens = 0
        self.recomputed_tokens = 0
        self.migrations = 0
        self.stale_rejections = 0
        self.fair_epochs = 0
        fair = options.fairness
        self._estimator = WorkEstimator(fair.config) if fair else None
        self._recent: dict[str, float] = {}
        self._pending: dict[str, float] = {}
        self._last_epoch_s = 0.0
        self._next_epoch_s = 0.0
        self._holds: frozenset[str] = frozenset()  # tenants whose new calls wait this epoch
        self._held: list[tuple[ProgramRun, int, float]] = []  # (run, call index, held since)
        self.held_calls = 0
        self.held_s = 0.0  # summed time calls waited at the controller
        self._stealing = options.affinity is not None and len(engines) > 1
        self._tick_s = options.steal_interval_s if self._stealing else (fair.epoch_s if fair else None)

    def run(self):
        if self._tick_s is not None and self._arrivals_s:
            self._queue.push(min(self._arrivals_s), EventKind.STEP_START, _TICK)
        return super().run()

    # -- hooks of the base loop -------------------------------------------------------------------

    def _start_step(self, payload, now: float) -> None:
        if payload is _TICK:
            self._tick(now)
            return
        super()._start_step(payload, now)

    def _route(self, run: ProgramRun, call: EngineCall) -> str:
        if self.options.affinity is None:
            engine_id = super()._route(run, call)
            self.engine_of_call[call.call_id] = engine_id
            return engine_id
        loads = {eid: self._engines[eid].load() for eid in self._engine_ids}
        pid = run.spec.program_id
        route = route_with_affinity(pid, self._pins.get(pid), loads)
        self._pins[pid] = route.pin
        check = check_request_epoch(route.pin.epoch, route.pin, route.engine_id)
        if not check.accept:  # cannot happen with instant routing; counted, then re-routed
            self.stale_rejections += 1
        self.engine_of_call[call.call_id] = route.engine_id
        return route.engine_id

    def _submit(self, run: ProgramRun, index: int, now: float) -> None:
        if self._holds and run.spec.tenant in self._holds:
            self._held.append((run, index, now))
            self.held_calls += 1
            return
        super()._submit(run, index, now)

    def _ready(self, run: ProgramRun, index: int, now: float) -> None:
        self._open[run.spec.program_id] = run
        super()._ready(run, index, now)

    def _complete(self, c: CallCompletion, now: float) -> None:
        facts = self._facts[c.call_id]
        self.prefill_tokens += c.prompt_tokens - c.prefix_hit_tokens + c.recomputed_tokens
        self.recomputed_tokens += max(facts.reusable_tokens - c.prefix_hit_tokens, 0) + c.recomputed_tokens
        tenant = self.tenant_of[c.program_id]
        self._pending[tenant] = self._pending.get(tenant, 0.0) + c.service_s
        super()._complete(c, now)

    def _finish_program(self, run: ProgramRun) -> None:
        pid = run.spec.program_id
        self._open.pop(pid, None)
        self._pins.pop(pid, None)
        self._finished += 1
        self.tct_s[pid] = run.finish_s - run.arrival_s
        if self._estimator is not None:
            self._estimator.observe_completion(run.spec.tenant, run.spec.workload, run.service_s)
        super()._finish_program(run)

    # -- periodic work ------------------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        if self._stealing:
            self._steal(now)
        fair = self.options.fairness
        if fair is not None and now >= self._next_epoch_s:
            self._fair_epoch(now, fair)
            self._next_epoch_s = now + fair.epoch_s
        if self._finished < self._num_programs:
            self._queue.push(now + self._tick_s, EventKind.STEP_START, _TICK)

    def _steal(self, now: float) -> None:
        cfg = self.options.affinity
        idle: dict[str, float] = {}
        for eid, engine in self._lite.items():
            if engine.has_work():
                self._idle_since[eid] = None
                idle[eid] = 0.0
            else:
                since = self._idle_since[eid]
                if since is None:
                    self._idle_since[eid] = since = now
                idle[eid] = now - since
        if max(idle.values()) < cfg.t_idle_s:
            return
        loads = {eid: e.load() for eid, e in self._lite.items()}
        queued: dict[str, list[QueuedSession]] = {}
        for eid, engine in self._lite.items():
            work: dict[str, float] = {}
            for seq in engine.queued_unstarted():
                work[seq.program_id] = work.get(seq.program_id, 0.0) + (
                    seq.prompt_tokens + seq.max_out - seq.computed)
            rows = []
            for pid, load in work.items():
                pin = self._pins.get(pid)
                if pin is None or pin.engine_id != eid:
                    continue
                rows.append(QueuedSession(pid, load, pin, engine.retained_blocks_of(pid)))
            queued[eid] = rows
        plan = plan_steals(loads, idle, queued, cfg)
        for m in plan.migrations:
            src, dst = self._lite[m.from_engine], self._lite[m.to_engine]
            calls = [s.call for s in src.queued_unstarted() if s.program_id == m.session_id]
            for call in calls:
                src.abort(call.call_id)
                dst.submit(call, now)
                self.engine_of_call[call.call_id] = m.to_engine
                self._calls_per_engine[m.to_engine] += 1
            src.release_session(m.session_id)
            self._pins[m.session_id] = m.new_pin
            self.migrations += 1
            self._idle_since[m.to_engine] = None
            self._maybe_start(m.to_engine, now)

    def _fair_epoch(self, now: float, fair: FairnessOptions) -> None:
        elapsed = now - self._last_epoch_s
        self._last_epoch_s = now
        for tenant in set(self._recent) | set(self._pending):
            self._recent[tenant] = decayed_service_s(self._recent.get(tenant, 0.0), elapsed,
                                                     self._pending.pop(tenant, 0.0), fair.half_life_s)
        tasks = [OpenTask(pid, run.spec.tenant, run.arrival_s, run.service_s, run.spec.workload)
                 for pid, run in self._open.items()]
        shares = rank_tenants(fair.tenants, tasks, now, self._estimator, self._recent)
        ranks = {s.tenant_id: s.rank for s in shares}
        for engine in self._lite.values():
            engine.set_tenant_ranks(ranks, self.tenant_of)
        self.fair_epochs += 1
        if fair.hold_admissions:
            specs = {t.tenant_id: t for t in fair.tenants}
            at_risk: dict[str, int] = {}
            for task in tasks:
                spec = specs.get(task.tenant_id, TenantSpec(task.tenant_id))
                at_risk[task.tenant_id] = at_risk.get(task.tenant_id, 0) + (
                    1 if fair.hold_when == "open" else at_risk_tasks((task,), spec, now, self._estimator))
            self._holds = admission_holds(shares, at_risk)
            released = [h for h in self._held if h[0].spec.tenant not in self._holds]
            self._held = [h for h in self._held if h[0].spec.tenant in self._holds]
            for run, index, since in released:
                self.held_s += now - since
                super()._submit(run, index, now)

    # -- results ----------------------------------------------------------------------------------

    def engine_stats(self) -> dict[str, int]:
        keys = ("retained_sessions", "retention_resumes", "retention_expired", "retention_victims",
                "preemptions", "prefix_hit_tokens", "prompt_tokens")
        return {k: sum(e.stats.get(k, 0) for e in self._lite.values()) for k in keys}
