"""Priority glue of the lite engine: keys from the pure core, their refresh, anti-starvation and
proactive preemption. Every decision is made by `shared.core` (`SchedulingPolicy.key`,
`plan_preemptions`, `should_promote`); this mixin only feeds them the engine's state.

`PriorityMixin` is mixed into `LiteEngine` and uses its queues, pool and counters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import chain as iter_chain

from shared.core.fairness import fair_share_key
from shared.core.policy import CallView
from shared.core.preemption import plan_preemptions
from shared.core.starvation import should_promote
from shared.engine.lite.config import BatchingMode
from shared.engine.lite.sequence import Seq

FAIR_CLASS_SPAN = 1_000_000  # more than any class (MLFQ level) a policy key carries
MAX_PRIORITY_PREEMPTIONS = 8  # per decision: bounds the work and the churn of one quantum


class PriorityMixin:
    def _init_fair_share(self) -> None:
        self._tenant_ranks: dict[str, int] | None = None  # None: no Agent Fair Share (plain keys)
        self._tenant_of: Mapping[str, str] = {}

    def set_tenant_ranks(self, ranks: Mapping[str, int] | None, tenant_of: Mapping[str, str]) -> None:
        """Agent Fair Share: the controller's tenant order (0 = capacity first) at an epoch, and
        each program's tenant. Keys become `fair_share_key(rank, policy key)`; a change re-keys
        the waiting queue and the running calls' cached keys (once per epoch: bounded churn).
        A tenant missing from `ranks` goes behind every ranked one."""
        self._tenant_of = tenant_of
        new = None if ranks is None else dict(ranks)
        if new == self._tenant_ranks:
            return
        self._tenant_ranks = new
        self.waiting.rekey_all(self._key)
        for seq in iter_chain(self.decoding.values(), self.prefilling):
            seq.rkey_snap = None

    def _priority_preemptions(self, preempted: list[str], chunks: dict[Seq, int]) -> None:
        """A waiting call of a strictly better class displaces the worst runners (pure core decides)."""
        head = self.waiting.peek()
        if head is None:
            return
        seqs_full = len(self.decoding) + len(self.prefilling) >= self.config.max_num_seqs
        kv_blocked = self._blocked is not None and self._blocked[0] is head
        if not (seqs_full or kv_blocked):
            return
        running = {s.order: (k, s) for k, s in self._running_keyed()}
        if not running:
            return
        if seqs_full:
            cands = self.waiting.best(min(len(running), MAX_PRIORITY_PREEMPTIONS))
            pk = self._preemption_key
            plan = plan_preemptions([(pk(c.key), c.order) for c in cands],
                                    [(pk(k), o) for o, (k, _) in running.items()], free_slots=0)
            for p in plan:
                self._preempt(running[p.victim][1], preempted, chunks, kv_exhausted=False)
            return
        if self.config.mode is BatchingMode.V0:
            need = self._admission_need(head, self.config.token_budget, True)[0]
        else:
            need = self._admission_need(head, self.config.token_budget - len(self.decoding), False)[0]
        for _ in range(MAX_PRIORITY_PREEMPTIONS):
            if self.pool.num_free >= need or not running:
                break
            pk = self._preemption_key
            plan = plan_preemptions([(pk(head.key), head.order)], [(pk(k), o) for o, (k, _) in running.items()], 0)
            if not plan:
                break
            _, victim = running.pop(plan[0].victim)
            self._preempt(victim, preempted, chunks, kv_exhausted=False)

    def _preemption_key(self, key: tuple) -> tuple:
        """`plan_preemptions` compares a numeric class (key[0]); a fair-share class is the pair
        (tenant rank, level): map it to rank x FAIR_CLASS_SPAN + level, the same order."""
        if self._tenant_ranks is None:
            return key
        rank, level = key[0]
        return (rank * FAIR_CLASS_SPAN + level,) + key[1:]

    def _running_keyed(self) -> list[tuple[tuple, Seq]]:
        return [(self._running_key(s), s) for s in iter_chain(self.decoding.values(), self.prefilling)]

    def _running_key(self, seq: Seq) -> tuple:
        """A running call's key, cached until its program's ledger changes or its own attained
        service crosses the next MLFQ threshold (the only ways an MLFQ/PLAS/ATLAS key changes)."""
        led = self.programs.ledger(seq.program_id)
        snap = (led.epoch, len(led.completed_call_ids))
        service = self._service_now(seq)
        if seq.rkey_snap == snap and service < seq.rkey_until_s:
            return seq.rkey
        base, view = self._base_key_view(seq)
        key = base if self._tenant_ranks is None else self._fair_key(seq, base)
        until = math.inf
        if view is not None:  # the policy says when its key changes by service alone
            until = service + (self.policy.next_key_change_s(view, self.policy.level(view)) - view.attained_s)
        seq.rkey, seq.rkey_snap, seq.rkey_until_s = key, snap, until
        return key

    def _key(self, seq: Seq) -> tuple:
        base = self._base_key(seq)
        return base if self._tenant_ranks is None else self._fair_key(seq, base)

    def _fair_key(self, seq: Seq, base: tuple) -> tuple:
        ranks = self._tenant_ranks
        tenant = self._tenant_of.get(seq.program_id)
        return fair_share_key(ranks.get(tenant, len(ranks)) if tenant is not None else len(ranks), base)

    def _base_key(self, seq: Seq) -> tuple:
        return self._base_key_view(seq)[0]

    def _base_key_view(self, seq: Seq) -> tuple[tuple, CallView | None]:
        call = seq.call
        if self._static_keys:
            return self.policy.key(CallView(call.arrival_s, call.seq, 0.0, 0.0, 0.0, call.program_arrival_s)), None
        led = self.programs.ledger(seq.program_id)
        service = self._service_now(seq)
        if led.epoch != seq.epoch_seen:
            self._sync_epoch(seq, led.epoch, service)
        view = CallView(
            arrival_s=call.arrival_s, seq=call.seq, attained_s=service - seq.attained_origin_s,
            program_service_s=led.service_s, thread_service_s=led.thread_service(seq.thread_id),
            program_arrival_s=call.program_arrival_s, oracle_remaining_s=call.oracle_remaining_s,
            expected_remaining_s=call.expected_remaining_s)
        return self.policy.key(view), view

    def _sync_epoch(self, seq: Seq, epoch: int, service_s: float) -> None:
        """The program was promoted since we last looked: attained service and wait restart."""
        seq.epoch_seen = epoch
        seq.attained_origin_s = service_s
        seq.wait_origin_s = self._now
        seq.service_at_wait_origin_s = service_s

    # ---- periodic: key refresh and anti-starvation
    def _maintain(self, now_s: float, promoted: list[str]) -> None:
        waiting = self.waiting
        if not waiting:
            self._dirty_programs.clear()
            return
        if not self._static_keys:
            for pid in self._dirty_programs:
                group = waiting.by_program.get(pid)
                if group:
                    self._rekey(group)
        self._dirty_programs.clear()
        if not self._static_keys:
            if now_s >= self._next_refresh_s:
                self._next_refresh_s = now_s + self.config.key_refresh_interval_s
                snapshots: dict[str, tuple[int, int]] = {}
                for pid, group in waiting.by_program.items():
                    led = self.programs.ledger(pid)
                    snap = (led.epoch, len(led.completed_call_ids))
                    if self._snapshots.get(pid) != snap:
                        self._rekey(group)
                    snapshots[pid] = snap
                self._snapshots = snapshots
        starvation = self.config.starvation
        if self._has_levels and starvation.beta is not None and now_s >= self._next_starvation_s:
            self._next_starvation_s = now_s + self.config.starvation_check_interval_s
            for pid, group in list(waiting.by_program.items()):
                led = self.programs.ledger(pid)
                for seq in group.values():
                    service = seq.service_s
                    if led.epoch != seq.epoch_seen:
                        self._sync_epoch(seq, led.epoch, service)
                    call_wait_s = (now_s - seq.wait_origin_s) - (service - seq.service_at_wait_origin_s)
                    if should_promote(starvation, led.wait_s, led.service_s, call_wait_s,
                                      service - seq.attained_origin_s):
                        self.programs.promote(pid)
                        self.stats["promotions"] += 1
                        promoted.append(pid)
                        self._rekey(group)
                        break

    def _rekey(self, group: dict[str, Seq]) -> None:
        for seq in list(group.values()):
            self.waiting.push(seq, self._key(seq))

