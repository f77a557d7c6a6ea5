"""The engine agent's operations on the scheduler inside vLLM's engine core process (backend vllm).

vLLM's engine core answers a utility request by looking a method up by name; `vllm_adapter` gives
it one, `autellix_call(op, *args)`, which hands the op to `dispatch` here. Which ops exist and
which method serves each is written once, in `HANDLERS` (one row per `SchedulerOp`, checked at
import), so a new op is a member of the enum plus one row, and a name the table lacks is refused
by name instead of being looked up on the scheduler.

`SchedulerOpsMixin` holds the handlers; it is mixed into every scheduler class of `vllm_adapter`
(program-aware and stock alike). This module imports nothing of vLLM: it reads the scheduler's
attributes only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from shared.engine.program_directory import CachedProgramDirectory


class SchedulerOp(enum.StrEnum):
    SERVE = "serve"  # (): keep a program directory of its own, fed by the table's updates
    APPLY = "apply"  # (ops): program updates, closes, tenant classes, in order
    DRAIN = "drain"  # (): finished calls' records since the last drain, and the engine's load


# what a finished call's accounting record carries to the engine agent (drain)
RECORD_FIELDS = ("program_id", "thread_id", "service_s", "wait_s", "preemptions", "prompt_tokens",
                 "output_tokens", "prefix_hit_tokens", "recomputed_tokens", "thread_service_at_submit_s",
                 "submit_epoch", "aborted", "finish_reason")

# the kinds of one `apply` op, its first element
APPLY_KINDS = ("update", "close", "tenants")


class SchedulerOpsMixin:
    """The handlers of `HANDLERS`; the scheduler provides `program_state`, `autellix_settings`,
    `attach_directory`, `apply_tenant_ranks`, `pop_finished_calls`, `pop_preempted_ids`, vLLM's
    request table and KV cache manager, and `_mesh_call_ids` (vLLM request id -> mesh call id)."""

    def autellix_serve(self) -> None:
        """This scheduler runs in its own engine process (backend vllm): no driver shares its
        program directory, so it keeps one, fed with the process table's states by `autellix_apply`."""
        if not isinstance(self.program_state.directory, CachedProgramDirectory):
            self.attach_directory(CachedProgramDirectory(self.autellix_settings.policy.aggregation))
        self._serving = True

    def autellix_apply(self, ops: list) -> int:
        """Program-service updates and closes, in order: ("update", program, S_p, W_p, {thread: s_T},
        epoch, completed) (a promotion arrives as the table's update with the new epoch),
        ("close", program), and the controller's tenant classes ("tenants", {tenant: class}; a
        tenant not listed: class 0)."""
        directory = self.program_state.directory
        for op in ops:
            kind, program_id = op[0], op[1]
            if kind == "tenants":
                self.apply_tenant_ranks({str(t): int(c) for t, c in dict(op[1]).items()}, missing_rank=0)
                continue
            if kind == "update":
                directory.apply_update(program_id, float(op[2]), float(op[3]), dict(op[4]), int(op[5]), int(op[6]))
            elif kind == "close":
                directory.close(program_id)
            else:
                raise ValueError(f"unknown apply kind {kind!r}; valid: {', '.join(APPLY_KINDS)}")
            self.program_state.mark_dirty(program_id)
        return len(ops)

    def autellix_drain(self) -> dict:
        """Finished calls' accounting since the last drain, and the engine's load."""
        finished = []
        for call in self.pop_finished_calls():
            record = {f: getattr(call, f) for f in RECORD_FIELDS}
            record["call_id"] = self._mesh_call_ids.pop(call.call_id, call.call_id)
            finished.append(record)
        running, waiting = self.get_request_counts()
        pool = self.kv_cache_manager.block_pool
        total = pool.num_gpu_blocks - 1  # block 0 is vLLM's null block
        load = sum(r.num_prompt_tokens + r.max_tokens - r.num_computed_tokens
                   for r in self.requests.values() if not r.is_finished())
        return {"finished": finished, "running": running, "waiting": waiting,
                "kv_used_blocks": total - pool.get_num_free_blocks(), "kv_total_blocks": total, "load": load,
                "preempted": [self._mesh_call_ids.get(r, r) for r in self.pop_preempted_ids()]}


Handler = Callable[..., Any]

# the one table: each op, the method that serves it
HANDLERS: Mapping[SchedulerOp, Handler] = MappingProxyType({
    SchedulerOp.SERVE: SchedulerOpsMixin.autellix_serve,
    SchedulerOp.APPLY: SchedulerOpsMixin.autellix_apply,
    SchedulerOp.DRAIN: SchedulerOpsMixin.autellix_drain,
})
if set(HANDLERS) != set(SchedulerOp) or len(set(HANDLERS.values())) != len(HANDLERS):
    raise AssertionError("every SchedulerOp needs exactly one handler of its own in HANDLERS")


def scheduler_op(op: str) -> SchedulerOp:
    """`op` as a `SchedulerOp`, or a ValueError naming the valid ones."""
    try:
        return SchedulerOp(op)
    except ValueError:
        raise ValueError(f"unknown scheduler operation {op!r}; valid: "
                         f"{', '.join(o.value for o in SchedulerOp)}") from None


def dispatch(scheduler: object, op: str, *args: Any) -> Any:
    """Run `op` on `scheduler` through `HANDLERS`; a scheduler without the handlers (not one of
    `vllm_adapter`'s classes) is refused by its class name."""
    handler = HANDLERS[scheduler_op(op)]
    if not isinstance(scheduler, SchedulerOpsMixin):
        raise ValueError(f"scheduler {type(scheduler).__name__} takes no Autellix operations")
    return handler(scheduler, *args)
