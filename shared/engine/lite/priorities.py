"""The lite engine's scheduling shell: every key, level, key-change horizon, promotion and
preemption decision is `ProgramScheduleState`'s, the same state (same settings, same code paths)
the vLLM scheduler class drives. This mixin only feeds it the engine's events.

Speed: a decoding call's service is charged to the state lazily (`_charge`, from the call's lazy
counters) just before its key is read: at a preemption decision, a KV victim choice, a preemption,
or when a ledger change re-keys its program. The keys read are the same as if every step were
charged (a key is a function of current service and ledger), at O(calls whose key is read).

`PriorityMixin` is mixed into `LiteEngine` and uses its queues, pool and counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain as iter_chain

from shared.engine.lite.config import BatchingMode
from shared.engine.lite.sequence import Seq
from shared.engine.program_meta import ProgramMeta
from shared.engine.program_sched import CallState, ProgramScheduleState, SchedulerSettings

full_key = ProgramScheduleState.full_key


class PriorityMixin:
    def _init_schedule(self) -> None:
        cfg = self.config
        self.sched = ProgramScheduleState(SchedulerSettings(
            self.policy, cfg.starvation, preemption_interval_steps=cfg.preemption_interval_steps,
            starvation_check_interval_s=cfg.starvation_check_interval_s,
            key_refresh_interval_s=cfg.key_refresh_interval_s, kv_victim=cfg.kv_victim), self.programs)
        self._tenant_ranks: dict[str, int] | None = None  # None: no tenant order (one outer class)
        self._missing_rank: int | None = None
        self._tenant_of: Mapping[str, str] = {}

    def _admit_call(self, seq: Seq, now_s: float) -> None:
        call = seq.call
        meta = ProgramMeta(program_id=call.program_id, thread_id=call.thread_id,
                           program_arrival_s=call.program_arrival_s, oracle_remaining_s=call.oracle_remaining_s,
                           seq=call.seq, expected_remaining_s=call.expected_remaining_s)
        seq.sc = self.sched.admit(seq.call_id, meta, call.arrival_s, seq.prompt_tokens, now_s,
                                  tenant=self._tenant_for(seq))

    def set_tenant_ranks(self, ranks: Mapping[str, int] | None, tenant_of: Mapping[str, str],
                         missing_rank: int | None = None) -> None:
        """The tenants' order (0 = capacity first: the simulator's Agent Fair Share epoch, or the
        live controller's fair-share classes) and each program's tenant. A call's tenant rank is
        its outer class (as vLLM's priority is in the vLLM shell); a change re-keys the waiting
        queue (once per epoch: bounded churn). A tenant missing from `ranks` gets `missing_rank`
        (None: behind every ranked one)."""
        self._tenant_of = tenant_of
        new = None if ranks is None else dict(ranks)
        if new == self._tenant_ranks and missing_rank == self._missing_rank:
            return
        self._tenant_ranks, self._missing_rank = new, missing_rank
        for seq in self.seqs.values():
            self.sched.retag_tenant(seq.sc, self._tenant_for(seq))
        self.sched.set_tenant_ranks(new, missing_rank)
        self.waiting.rekey_all(lambda s: full_key(s.sc))

    def _tenant_for(self, seq: Seq) -> str:
        return seq.call.tenant or self._tenant_of.get(seq.program_id, "")

    # ---- service, charged lazily
    def _charge(self, seq: Seq) -> CallState:
        service = self._service_now(seq)
        if service != seq.charged_s:
            self.sched.charge_call(seq.sc, service - seq.charged_s)
            seq.charged_s = service
        return seq.sc

    def _charge_call_state(self, call: CallState) -> None:
        seq = self.seqs.get(call.call_id)
        if seq is not None:
            self._charge(seq)

    def _running_calls(self) -> list[CallState]:
        charge = self._charge
        return [charge(s) for s in iter_chain(self.decoding.values(), self.prefilling)]

    def _key(self, seq: Seq) -> tuple:
        return full_key(self._charge(seq))

    # ---- decisions (the state's)
    def _priority_preemptions(self, preempted: list[str], chunks: dict[Seq, int]) -> None:
        """A waiting call of a strictly better class displaces the worst runners, as the vLLM shell's
        `_before_schedule`: all slots taken -> `plan_for_slots`; else KV short -> `plan_for_kv`."""
        head = self.waiting.peek()
        running = self._running_calls()
        if head is None or not running or not self.sched.beats_worst(head.sc, running):
            return
        self.sched.decision_made()
        seqs = self.seqs
        limit = self.sched.settings.max_preemptions_per_decision
        if len(self.decoding) + len(self.prefilling) >= self.config.max_num_seqs:
            best = [s.sc for s in self.waiting.best(min(len(running), limit))]
            for p in self.sched.plan_for_slots(best, running):
                self._preempt(seqs[p.victim], preempted, chunks, kv_exhausted=False)
            return
        if self.config.mode is BatchingMode.V0:
            need = self._admission_need(head, self.config.token_budget, True)[0]
        else:
            need = self._admission_need(head, self.config.token_budget - len(self.decoding), False)[0]
        for _ in range(limit):
            if self.pool.num_free >= need or not running:
                break
            p = self.sched.plan_for_kv(head.sc, running)
            if p is None:
                break
            running = [c for c in running if c.call_id != p.victim]
            self._preempt(seqs[p.victim], preempted, chunks, kv_exhausted=False)

    def _kv_victim(self) -> Seq:
        """KV ran out for a running call: the state's victim (the vLLM shell makes vLLM pick the same)."""
        head = self.waiting.peek()
        return self.seqs[self.sched.kv_victim(self._running_calls(), head.sc if head is not None else None).call_id]

    def _maintain(self, now_s: float, promoted: list[str]) -> None:
        """Before planning: promotions and ledger changes, applied by the state (as the vLLM shell)."""
        waiting = self.waiting
        if not waiting:
            return
        result = self.sched.refresh(now_s, lambda: [s.sc for s in waiting.members.values()],
                                    sync=self._charge_call_state)
        seqs = self.seqs
        for call in result.requeue:
            waiting.push(seqs[call.call_id], full_key(call))
        if result.promoted_programs:
            self.stats["promotions"] += len(result.promoted_programs)
            promoted.extend(result.promoted_programs)
