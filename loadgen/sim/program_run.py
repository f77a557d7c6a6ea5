"""Run-time state of one program inside the simulator: which calls are unblocked, what is left."""

from __future__ import annotations

from loadgen.workloads.spec import ProgramSpec


class ProgramRun:
    """Dependency counters and running totals of one program (the DAG is revealed call by call)."""

    __slots__ = (
        "spec", "arrival_s", "pending_deps", "children", "num_finished", "finish_s",
        "primary_engine", "call_oracle_s", "oracle_remaining_s", "wait_s", "service_s",
        "delay_s", "preemptions",
    )

    def __init__(self, spec: ProgramSpec, arrival_s: float, call_oracle_s: list[float] | None) -> None:
        self.spec = spec
        self.arrival_s = arrival_s
        index = {c.call_id: i for i, c in enumerate(spec.calls)}
        self.pending_deps = [len(c.depends_on) for c in spec.calls]
        self.children: list[list[int]] = [[] for _ in spec.calls]
        for i, call in enumerate(spec.calls):
            for dep in call.depends_on:
                if dep not in index:
                    raise ValueError(f"call {call.call_id} depends on unknown call {dep}")
                self.children[index[dep]].append(i)
        self.num_finished = 0
        self.finish_s = arrival_s
        self.primary_engine: str | None = None  # where its first call ran (KV locality)
        self.call_oracle_s = call_oracle_s
        self.oracle_remaining_s = sum(call_oracle_s) if call_oracle_s else 0.0
        self.wait_s = 0.0
        self.service_s = 0.0
        self.delay_s = 0.0
        self.preemptions = 0

    def roots(self) -> list[int]:
        return [i for i, n in enumerate(self.pending_deps) if n == 0]

    def finish_call(self, index: int, now_s: float) -> list[int]:
        """Mark a call finished; return the calls it unblocked."""
        self.num_finished += 1
        self.finish_s = max(self.finish_s, now_s)  # the last call to finish ends the critical path
        if self.call_oracle_s:
            self.oracle_remaining_s = max(self.oracle_remaining_s - self.call_oracle_s[index], 0.0)
        ready = []
        for child in self.children[index]:
            self.pending_deps[child] -= 1
            if self.pending_deps[child] == 0:
                ready.append(child)
        return ready

    @property
    def done(self) -> bool:
        return self.num_finished == len(self.spec.calls)
