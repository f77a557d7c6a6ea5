"""Program-aware scheduling state for a vLLM-style engine: the brain of ProgramAwareScheduler.

Pure (no vLLM, no clock): the vLLM subclass passes `now_s` and step durations in and applies what
comes out (priorities, queue repairs, preemptions). Every decision is the shared core's:
`SchedulingPolicy.key/level`, `plan_preemptions`, `should_promote`, `ProgramLedger`.

Service model: a call's attained service is engine time while it is in a scheduled
batch (since its program's last promotion); its level comes from the program's service S_p plus
that attained service, so a new call inherits its program's level and is demoted by its own service.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.core.mlfq import MlfqConfig
from shared.core.policy import CallView, SchedulingPolicy, parse_policy
from shared.core.preemption import Preemption
from shared.core.service_class import outer_class, plan_class_preemptions, strictly_better
from shared.core.starvation import StarvationConfig, should_promote
from shared.engine.api import DictProgramDirectory, ProgramDirectory, PromotingDirectory
from shared.engine.program_meta import ProgramMeta

CONFIG_KEY = "autellix"  # VllmConfig.additional_config[CONFIG_KEY] holds SchedulerSettings fields
# Who KV exhaustion inside a step evicts. "policy": the runner the policy's own order puts last
# (worst class of service, then worst policy key): it is re-admitted after every call that stays,
# so it never displaces the call that evicted it (no evict/re-admit ping-pong). "readmit": the
# worst of the runners the waiting order would re-admit ahead of every waiting call (so its freed
# blocks are re-hit before others reuse them, as FCFS's victim is); with none such, as "policy".
# "arrival": vLLM's own rule under its priority policy (worst client class, then the latest
# arrival), which ignores program levels.
KV_VICTIM_RULES = ("policy", "readmit", "arrival")
# the default, picked by the rule written before the readmit runs (docs/results/kv_victim): neither
# program-aware rule beat vLLM's own by more than one bracket in the median run
DEFAULT_KV_VICTIM = "arrival"


@dataclass(frozen=True)
class SchedulerSettings:
    policy: SchedulingPolicy = SchedulingPolicy("plas")
    starvation: StarvationConfig = StarvationConfig()
    min_class_gap: float = 0.0
    # anti-thrash quantum, as the lite engine: proactive preemption is decided at most every this
    # many steps, displacing at most this many runners per decision
    preemption_interval_steps: int = 4
    max_preemptions_per_decision: int = 8
    starvation_check_interval_s: float = 0.25
    key_refresh_interval_s: float = 0.05  # program ledgers re-read at most this often (as lite)
    kv_victim: str = DEFAULT_KV_VICTIM  # one of KV_VICTIM_RULES
    step_log: str = ""  # a real engine's file of per-step times and work (shared/engine/step_log.py); "" off

    def __post_init__(self) -> None:
        if self.kv_victim not in KV_VICTIM_RULES:
            raise ValueError(f"unknown kv_victim rule {self.kv_victim!r}; valid: {', '.join(KV_VICTIM_RULES)}")
        if self.preemption_interval_steps < 1 or self.max_preemptions_per_decision < 1:
            raise ValueError("preemption_interval_steps and max_preemptions_per_decision must be >= 1")
        if self.starvation_check_interval_s < 0 or self.key_refresh_interval_s < 0:
            raise ValueError("starvation_check_interval_s and key_refresh_interval_s must be >= 0")

    @classmethod
    def from_config(cls, raw: Mapping[str, Any] | None) -> SchedulerSettings:
        """From `additional_config["autellix"]`: policy, num_levels, base_quantum_s, beta, ..."""
        raw = dict(raw or {})
        known = {"policy", "num_levels", "base_quantum_s", "growth", "beta", "min_service_s", "min_class_gap",
                 "preemption_interval_steps", "max_preemptions_per_decision", "starvation_check_interval_s",
                 "key_refresh_interval_s", "kv_victim", "step_log"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown autellix scheduler settings {unknown}; known: {sorted(known)}")
        mlfq = MlfqConfig(num_levels=int(raw.get("num_levels", 8)),
                          base_quantum_s=float(raw.get("base_quantum_s", 1.0)),
                          growth=float(raw.get("growth", 2.0)))
        policy = SchedulingPolicy(parse_policy(str(raw.get("policy", "plas"))), mlfq)
        beta = raw.get("beta", StarvationConfig().beta)
        starvation = StarvationConfig(beta=None if beta is None else float(beta),
                                      min_service_s=float(raw.get("min_service_s", 1.0)))
        return cls(policy, starvation, float(raw.get("min_class_gap", 0.0)),
                   int(raw.get("preemption_interval_steps", 4)), int(raw.get("max_preemptions_per_decision", 8)),
                   float(raw.get("starvation_check_interval_s", 0.25)),
                   float(raw.get("key_refresh_interval_s", 0.05)), str(raw.get("kv_victim", DEFAULT_KV_VICTIM)),
                   str(raw.get("step_log", "")))

    def to_config(self) -> dict[str, Any]:
        """The `additional_config["autellix"]` dict that reproduces these settings."""
        m = self.policy.mlfq
        return {"policy": str(self.policy.name), "num_levels": m.num_levels, "base_quantum_s": m.base_quantum_s,
                "growth": m.growth, "beta": self.starvation.beta, "min_service_s": self.starvation.min_service_s,
                "min_class_gap": self.min_class_gap, "preemption_interval_steps": self.preemption_interval_steps,
                "max_preemptions_per_decision": self.max_preemptions_per_decision,
                "starvation_check_interval_s": self.starvation_check_interval_s,
                "key_refresh_interval_s": self.key_refresh_interval_s, "kv_victim": self.kv_victim,
                "step_log": self.step_log}


@dataclass(slots=True, eq=False)
class CallState:
    """One request as the program-aware scheduler sees it."""

    call_id: str
    program_id: str
    thread_id: str
    arrival_s: float
    seq: int
    program_arrival_s: float
    oracle_remaining_s: float
    expected_remaining_s: float | None  # SERPT's learned estimate at submit (None: none yet)
    submit_epoch: int
    thread_service_at_submit_s: float
    prompt_tokens: int
    outer: int = 0  # class of service ahead of the policy key: client priority, then tenant rank
    client_priority: int = 0  # vLLM's request priority as the client gave it
    tenant: str = ""  # whose fair share the call counts against ("": none known)
    epoch: int = 0  # the program's ledger epoch these figures belong to
    attained_s: float = 0.0  # own service since the program's last promotion
    service_s: float = 0.0  # own service in total
    wait_s: float = 0.0  # closed waiting intervals
    waiting_since_s: float | None = None  # open waiting interval (None while running)
    wait_at_epoch_s: float = 0.0  # total wait when the program was last promoted
    key: tuple = ()
    level: int = 0
    next_change_s: float = float("inf")  # attained service at which the level changes
    program_service_s: float = 0.0  # S_p used for `key`
    running: bool = False
    admitted: bool = False
    preemptions: int = 0
    prefix_hit_tokens: int = 0  # served from the prefix cache at first admission
    resume_hit_tokens: int = 0  # served from the prefix cache when resuming after preemptions
    recomputed_tokens: int = 0
    high_water_tokens: int = 0  # most tokens ever computed (anything below is recomputation)
    output_tokens: int = 0
    first_token_s: float | None = None
    finish_s: float | None = None
    aborted: bool = False
    finish_reason: str = ""  # "stop", "length", "abort" or "error" (vLLM's reason), once finished

    def current_wait_s(self, now_s: float) -> float:
        return self.wait_s + (now_s - self.waiting_since_s if self.waiting_since_s is not None else 0.0)


@dataclass
class RefreshResult:
    requeue: list[CallState] = field(default_factory=list)  # waiting calls whose key changed
    reprioritized: list[CallState] = field(default_factory=list)  # running calls whose level changed
    promoted_programs: list[str] = field(default_factory=list)


_NOTHING = RefreshResult()


class ProgramScheduleState:
    """Calls, keys and levels of one engine; reads program state from a ProgramDirectory."""

    def __init__(self, settings: SchedulerSettings, directory: ProgramDirectory | None = None) -> None:
        self.settings = settings
        self.policy = settings.policy
        self.directory: ProgramDirectory = directory if directory is not None else DictProgramDirectory()
        if settings.starvation.beta is not None and not isinstance(self.directory, PromotingDirectory):
            raise ValueError("engine-local anti-starvation (a beta) needs a directory that owns program state "
                             "(the simulator's); an engine in the mesh takes promotions from the process table")
        self.calls: dict[str, CallState] = {}
        self._by_program: dict[str, set[str]] = {}
        self._program_seen: dict[str, tuple[float, int, int]] = {}  # (S_p, epoch, ledger version)
        self._next_seq = 0
        self._next_starvation_check_s = float("-inf")
        self._next_key_refresh_s = float("-inf")
        self._dirty: set[str] = set()  # programs to re-read at the next refresh
        self._steps_since_decision = settings.preemption_interval_steps - 1  # the first step may decide
        self._tenant_ranks: Mapping[str, int] | None = None  # None: no tenant order (one class)
        self._missing_rank: int | None = None  # rank of a tenant not in the ranks (None: behind all)

    # --- admission and removal ---------------------------------------------------------------
    def admit(self, call_id: str, meta: ProgramMeta, arrival_s: float, prompt_tokens: int,
              now_s: float, client_priority: int = 0, tenant: str = "") -> CallState:
        if call_id in self.calls:
            raise ValueError(f"duplicate request id {call_id!r}")
        ledger = self.directory.ledger(meta.program_id)
        seq = meta.seq if meta.seq is not None else self._next_seq
        self._next_seq = max(self._next_seq, seq) + 1
        call = CallState(
            call_id=call_id, program_id=meta.program_id, thread_id=meta.thread_id, arrival_s=arrival_s,
            seq=seq, program_arrival_s=meta.program_arrival_s if meta.program_arrival_s is not None else arrival_s,
            oracle_remaining_s=meta.oracle_remaining_s, expected_remaining_s=meta.expected_remaining_s,
            submit_epoch=ledger.epoch,
            thread_service_at_submit_s=ledger.thread_service(meta.thread_id), prompt_tokens=prompt_tokens,
            client_priority=client_priority, tenant=tenant, epoch=ledger.epoch, waiting_since_s=now_s,
        )
        call.outer = self._outer_of(call)
        self.calls[call_id] = call
        self._by_program.setdefault(meta.program_id, set()).add(call_id)
        self._rekey(call)
        return call

    def remove(self, call_id: str) -> CallState | None:
        call = self.calls.pop(call_id, None)
        if call is not None:
            self._dirty.add(call.program_id)
            ids = self._by_program.get(call.program_id)
            if ids is not None:
                ids.discard(call_id)
                if not ids:
                    del self._by_program[call.program_id]
                    self._program_seen.pop(call.program_id, None)
        return call

    def mark_dirty(self, program_id: str) -> None:
        """The program's ledger changed outside a step (an update or promotion from the mesh):
        its calls are re-keyed at the next refresh."""
        self._dirty.add(program_id)

    # --- tenant order ------------------------------------------------------------------------
    def set_tenant_ranks(self, ranks: Mapping[str, int] | None, missing_rank: int | None = None) -> list[CallState]:
        """The tenants' order (0 = capacity first), e.g. the controller's fair-share classes; a
        tenant not in `ranks` gets `missing_rank` (None: behind every ranked tenant). Returns the
        calls whose class changed: the shell re-sorts its queues (preemption reads `outer`)."""
        self._tenant_ranks = None if ranks is None else dict(ranks)
        self._missing_rank = missing_rank
        changed = []
        for call in self.calls.values():
            outer = self._outer_of(call)
            if outer != call.outer:
                call.outer = outer
                changed.append(call)
        return changed

    def retag_tenant(self, call: CallState, tenant: str) -> None:
        call.tenant = tenant
        call.outer = self._outer_of(call)

    def _outer_of(self, call: CallState) -> int:
        ranks = self._tenant_ranks
        if ranks is None:
            return outer_class(call.client_priority, 0)
        missing = len(ranks) if self._missing_rank is None else self._missing_rank
        return outer_class(call.client_priority, ranks.get(call.tenant, missing))

    # --- keys --------------------------------------------------------------------------------
    def view(self, call: CallState) -> CallView:
        ledger = self.directory.ledger(call.program_id)
        return CallView(arrival_s=call.arrival_s, seq=call.seq, attained_s=call.attained_s,
                        program_service_s=ledger.service_s, thread_service_s=ledger.thread_service(call.thread_id),
                        program_arrival_s=call.program_arrival_s, oracle_remaining_s=call.oracle_remaining_s,
                        expected_remaining_s=call.expected_remaining_s)

    def _rekey(self, call: CallState) -> bool:
        """Recompute key and level from the core; True when the key changed."""
        view = self.view(call)
        key = self.policy.key(view)
        call.level = self.policy.level(view)
        call.program_service_s = view.program_service_s
        call.next_change_s = self.policy.next_key_change_s(view, call.level)
        changed = key != call.key
        call.key = key
        return changed

    # --- per-step accounting -----------------------------------------------------------------
    def charge(self, call_ids: Iterable[str], duration_s: float) -> list[CallState]:
        """Add one step's duration to every call in the batch; returns calls whose key changed."""
        calls = self.calls
        return [call for call in (calls.get(cid) for cid in call_ids)
                if call is not None and self.charge_call(call, duration_s)]

    def charge_call(self, call: CallState, duration_s: float) -> bool:
        """Add service to one call; True when its key changed (it crossed its horizon)."""
        call.attained_s += duration_s
        call.service_s += duration_s
        return call.attained_s >= call.next_change_s and self._rekey(call)

    def mark_running(self, call: CallState, now_s: float) -> None:
        if call.waiting_since_s is not None:
            call.wait_s += max(now_s - call.waiting_since_s, 0.0)
            call.waiting_since_s = None
        call.running = True

    def mark_waiting(self, call: CallState, now_s: float) -> None:
        if call.waiting_since_s is None:
            call.waiting_since_s = now_s
        call.running = False

    def refresh(self, now_s: float, waiting: Callable[[], Iterable[CallState]],
                sync: Callable[[CallState], None] | None = None) -> RefreshResult:
        """Before a scheduling step: apply promotions and program-service updates to every call.

        Program ledgers are re-read every `key_refresh_interval_s`, and at once for programs
        promoted here or whose calls just finished here (the driver folds a completion into the
        ledger right after the step that finished it). The result must not be modified."""
        cfg = self.settings.starvation
        starvation_due = cfg.beta is not None and self.policy.has_levels and now_s >= self._next_starvation_check_s
        if self.policy.static_key or not (starvation_due or self._dirty or now_s >= self._next_key_refresh_s):
            return _NOTHING  # the common step: nothing due (arrival order: never anything)
        result = RefreshResult()
        # 1. anti-starvation: a waiting call whose program waited beta times its service
        if starvation_due:
            self._next_starvation_check_s = now_s + self.settings.starvation_check_interval_s
            for call in waiting():
                if call.program_id in result.promoted_programs:
                    continue
                ledger = self.directory.ledger(call.program_id)
                if should_promote(cfg, ledger.wait_s, ledger.service_s,
                                  call.current_wait_s(now_s) - call.wait_at_epoch_s, call.attained_s):
                    self.directory.promote(call.program_id)
                    result.promoted_programs.append(call.program_id)
                    self._dirty.add(call.program_id)
        # 2. program-service changes (completions folded in by the process table, promotions)
        if now_s >= self._next_key_refresh_s:
            self._next_key_refresh_s = now_s + self.settings.key_refresh_interval_s
            programs: Iterable[str] = list(self._by_program)
        else:
            programs = [p for p in self._dirty if p in self._by_program]
        self._dirty.clear()
        # the ledger's version moves with every transition (completion, promotion, table update)
        ledger_of, seen_before = self.directory.ledger, self._program_seen
        for program_id in programs:
            ledger = ledger_of(program_id)
            seen = (ledger.service_s, ledger.epoch, ledger.version)
            if seen_before.get(program_id) == seen:
                continue
            seen_before[program_id] = seen
            for cid in self._by_program[program_id]:
                call = self.calls[cid]
                if sync is not None:
                    sync(call)  # a shell that charges service lazily brings this call's up to date
                if call.epoch != ledger.epoch:  # promoted: own service and wait count from now
                    call.epoch = ledger.epoch
                    call.attained_s = 0.0
                    call.wait_at_epoch_s = call.current_wait_s(now_s)
                if self._rekey(call):
                    (result.reprioritized if call.running else result.requeue).append(call)
        return result

    # --- preemption decisions ----------------------------------------------------------------
    def preemption_due(self) -> bool:
        """Once per scheduling step: whether a proactive preemption decision may be made now (at
        most one every `preemption_interval_steps` steps: the anti-thrash quantum)."""
        self._steps_since_decision += 1
        return self._steps_since_decision >= self.settings.preemption_interval_steps

    def decision_made(self) -> None:
        self._steps_since_decision = 0

    def kv_victim(self, running: list[CallState], head: CallState | None = None) -> CallState:
        """The runner KV exhaustion inside a step evicts, by the settings' rule (KV_VICTIM_RULES);
        `head`: the best waiting call now (None: nobody waits)."""
        return max(running, key=self._victim_order(head))

    def kv_victim_ranks(self, running: list[CallState], head: CallState | None = None) -> dict[str, int]:
        """Each runner's rank in the victim order (the highest is evicted first): a shell whose
        engine evicts by max rank (vLLM: max (priority, arrival)) evicts as `kv_victim` does, and
        keeps doing so as victims leave and join the waiting queue (each victim that beats the
        head becomes the head, and the next by "readmit" is the worst runner ahead of it)."""
        return {c.call_id: i for i, c in enumerate(sorted(running, key=self._victim_order(head)))}

    def _victim_order(self, head: CallState | None) -> Callable[[CallState], tuple]:
        rule, full_key = self.settings.kv_victim, self.full_key
        if rule == "arrival":
            return lambda c: (c.outer, c.arrival_s, c.seq)
        if rule == "readmit" and head is not None:
            bar = full_key(head)
            return lambda c: (full_key(c) < bar,) + full_key(c) + (c.arrival_s, c.seq)
        return lambda c: full_key(c) + (c.arrival_s, c.seq)

    @staticmethod
    def full_key(call: CallState) -> tuple:
        """The call's whole order: its class of service, then the policy key."""
        return (call.outer,) + call.key

    def beats_worst(self, head: CallState, running: list[CallState]) -> bool:
        """Whether the best waiting call's class is strictly better than the worst runner's."""
        worst = max(running, key=lambda c: (c.outer, c.key[0]))
        return strictly_better(head.outer, head.key[0], worst.outer, worst.key[0])

    def plan_for_slots(self, waiting_best: list[CallState], running: list[CallState]) -> list[Preemption]:
        """The batch is full (max_num_seqs): the best waiting calls displace strictly worse runners."""
        if not self.policy.preemptive or not waiting_best or not running:
            return []
        cands = waiting_best[:min(len(running), self.settings.max_preemptions_per_decision)]
        return plan_class_preemptions([(c.outer, c.key, c.call_id) for c in cands],
                                      [(c.outer, c.key, c.call_id) for c in running], self.settings.min_class_gap)

    def plan_for_kv(self, head: CallState, running: list[CallState]) -> Preemption | None:
        """KV blocks stop the best waiting call: it displaces the worst runner if strictly worse
        (the shell repeats while blocks are short, up to max_preemptions_per_decision)."""
        if not self.policy.preemptive or not running:
            return None
        plan = plan_class_preemptions([(head.outer, head.key, head.call_id)],
                                      [(c.outer, c.key, c.call_id) for c in running], self.settings.min_class_gap)
        return plan[0] if plan else None
