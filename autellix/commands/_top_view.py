"""What `autellix top` shows, folded from bus messages (no I/O here: the command feeds it), and its rich tables."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Group
from rich.table import Table

from shared.core.mlfq import MlfqConfig
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.programs import is_one_call_program

# what the view is fed from (core NATS, nothing durable): (subject, message types)
SUBJECTS = ((subjects.all_engine_heartbeats(), (m.EngineHeartbeat,)),
            (subjects.all_engine_queues(), (m.EngineQueueSnapshot,)),
            (subjects.all_program_services(), (m.ProgramServiceUpdated,)),
            (subjects.tenant_shares(), (m.TenantShares,)),
            (subjects.all_events(), m.AUDIT_EVENT_TYPES))
ENGINE_GONE_S = 5.0  # an engine silent this long leaves the view
FINISHED_KEPT_S = 5.0  # a closed session or finished one-call program stays this long, marked


@dataclass
class ProgramRow:
    program_id: str
    tenant: str = ""
    workload_class: str = ""
    service_s: float = 0.0
    wait_s: float = 0.0
    threads: set[str] = field(default_factory=lambda: {"main"})
    engine: str = ""
    calls_running: int = 0
    calls_done: int = 0
    waiting_level: int | None = None  # from the engines' queue snapshots, while a call waits
    finished_at_s: float | None = None
    last_seen_s: float = 0.0


@dataclass
class EngineRow:
    engine_id: str
    backend: str = ""
    model: str = ""
    running: int = 0
    waiting: int = 0
    kv_use: float = 0.0
    load: float = 0.0
    last_seen_s: float = 0.0


class TopView:
    def __init__(self, mlfq: MlfqConfig | None = None, clock=time.monotonic) -> None:
        self.mlfq = mlfq or MlfqConfig()
        self.clock = clock
        self.programs: dict[str, ProgramRow] = {}
        self.engines: dict[str, EngineRow] = {}
        self.shares: m.TenantShares | None = None  # the controller's last fair-share decision

    def _program(self, program_id: str) -> ProgramRow:
        row = self.programs.get(program_id)
        if row is None:
            row = self.programs[program_id] = ProgramRow(program_id)
        row.last_seen_s = self.clock()
        return row

    # --- messages ------------------------------------------------------------------------------
    def on_message(self, body: object) -> None:
        handler = getattr(self, f"_on_{type(body).__name__}", None)
        if handler is not None:
            handler(body)

    def _on_EngineHeartbeat(self, hb: m.EngineHeartbeat) -> None:
        row = self.engines.setdefault(hb.engine_id, EngineRow(hb.engine_id))
        row.backend, row.model, row.running, row.waiting = hb.backend, hb.model, hb.running_calls, hb.queue_depth
        row.kv_use, row.load, row.last_seen_s = hb.kv_use, hb.load, self.clock()

    def _on_EngineQueueSnapshot(self, snap: m.EngineQueueSnapshot) -> None:
        for row in self.programs.values():
            if row.engine == snap.engine_id:
                row.waiting_level = None
        for call in snap.waiting:
            if call.program_id in self.programs:
                self.programs[call.program_id].waiting_level = call.level

    def _on_ProgramServiceUpdated(self, u: m.ProgramServiceUpdated) -> None:
        row = self._program(u.program_id)
        row.service_s, row.wait_s = u.service_s, u.wait_s
        row.threads |= u.thread_service_s.keys()
        row.calls_done = max(row.calls_done, u.num_completed_calls)

    def _on_TenantShares(self, shares: m.TenantShares) -> None:
        self.shares = shares

    def _on_SessionOpened(self, e: m.SessionOpened) -> None:
        row = self._program(e.session_id)
        row.tenant, row.workload_class = e.tenant, e.workload_class

    def _on_SessionClosed(self, e: m.SessionClosed) -> None:
        self._program(e.session_id).finished_at_s = self.clock()

    def _on_CallSubmitted(self, e: m.CallSubmitted) -> None:
        row = self._program(e.program_id)
        row.tenant = row.tenant or e.tenant
        row.threads.add(e.thread_id)
        row.calls_running += 1

    def _on_CallRouted(self, e: m.CallRouted) -> None:
        self._program(e.program_id).engine = e.engine_id

    def _on_CallCompleted(self, e: m.CallCompleted) -> None:
        row = self._program(e.program_id)
        row.tenant = row.tenant or e.tenant
        row.engine = e.engine_id or row.engine
        row.calls_running = max(row.calls_running - 1, 0)
        if is_one_call_program(e.program_id):
            row.service_s, row.wait_s, row.calls_done = e.service_s, e.wait_s, 1
            row.finished_at_s = self.clock()

    # --- what is shown ---------------------------------------------------------------------------
    def expire(self) -> None:
        now = self.clock()
        for pid in [p for p, r in self.programs.items() if r.finished_at_s is not None
                    and now - r.finished_at_s > FINISHED_KEPT_S]:
            del self.programs[pid]
        for eid in [e for e, r in self.engines.items() if now - r.last_seen_s > ENGINE_GONE_S]:
            del self.engines[eid]

    def level(self, row: ProgramRow) -> int:
        return row.waiting_level if row.waiting_level is not None else self.mlfq.level_for(row.service_s)

    def tenants(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for row in self.programs.values():
            t = out.setdefault(row.tenant or "?", {"programs": 0, "running": 0, "service_s": 0.0, "wait_s": 0.0})
            t["programs"] += 1
            t["running"] += row.calls_running
            t["service_s"] += row.service_s
            t["wait_s"] += row.wait_s
        return out

    def render(self, max_programs: int = 30) -> Group:
        self.expire()
        programs = Table(title=f"programs ({len(self.programs)})", expand=True)
        programs.add_column("program", no_wrap=True, min_width=12)  # ids are what a reader searches for
        for col in ("tenant", "class", "service s", "wait s", "level", "threads", "calls", "engine"):
            programs.add_column(col, no_wrap=True,
                                justify="right" if col.endswith((" s", "level", "threads", "calls")) else "left")
        ordered = sorted(self.programs.values(), key=lambda r: (r.finished_at_s is not None, -r.last_seen_s))
        for row in ordered[:max_programs]:
            calls = f"{row.calls_done}" + (f"+{row.calls_running}" if row.calls_running else "")
            name = row.program_id if row.finished_at_s is None else f"{row.program_id} (done)"
            programs.add_row(name, row.tenant, row.workload_class, f"{row.service_s:.2f}", f"{row.wait_s:.2f}",
                             str(self.level(row)), str(len(row.threads)), calls, row.engine)
        engines = Table(title=f"engines ({len(self.engines)})", expand=True)
        for col in ("engine", "backend", "model", "running", "waiting", "KV use", "load"):
            engines.add_column(col, justify="left" if col in ("engine", "backend", "model") else "right")
        for row in sorted(self.engines.values(), key=lambda r: r.engine_id):
            engines.add_row(row.engine_id, row.backend, row.model, str(row.running), str(row.waiting),
                            f"{100 * row.kv_use:.1f}%", f"{row.load:.0f}")
        tenants = Table(title="tenants", expand=True)
        for col in ("tenant", "programs", "running calls", "service s", "wait s", "wait share", "recent s", "share"):
            tenants.add_column(col, justify="left" if col in ("tenant", "share") else "right")
        recent = self.shares.service_s if self.shares is not None else {}
        behind = self.shares.classes if self.shares is not None else {}
        for name, t in sorted(self.tenants().items()):
            total = t["service_s"] + t["wait_s"]
            tenants.add_row(name, f"{t['programs']:.0f}", f"{t['running']:.0f}", f"{t['service_s']:.2f}",
                            f"{t['wait_s']:.2f}", f"{t['wait_s'] / total:.0%}" if total else "-",
                            f"{recent[name]:.2f}" if name in recent else "-",
                            f"behind ({behind[name]})" if behind.get(name) else ("fair" if self.shares is not None else "-"))
        return Group(engines, tenants, programs)
