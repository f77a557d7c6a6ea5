"""The multi-host run, inside `unshare -r -n -m` (run.py starts it there): bring up the hosts and
the mesh, drive load, cut the link of the NATS node that leads the completions stream, kill an
engine host's agent, then audit: the ledger (nothing lost, nothing counted twice), where the lost
engine's calls went, per-call recovery, and the streams' replicas. Writes one JSON object.

    python -m loadgen.multihost.inside --root DIR --database-url URL --out FILE   (inside only)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loadgen.chaos.ledger import audit
from loadgen.chaos.workload import Tally, WorkloadSpec
from loadgen.multihost import observe
from loadgen.multihost.load import run_load
from loadgen.multihost.mesh import MultiHostMesh
from loadgen.multihost.nats_cluster import CLIENT_PORT
from loadgen.multihost.recovery import Span, longest_outage, recovery
from runtime.nats_auth import with_credentials
from shared.bus import Bus
from shared.protocol import subjects
from shared.protocol.nats_roles import ADMIN

LOST_ENGINE_HOST = "engine-a"
# how long the audit waits for a placement still being resent into the stream (the publishers
# resend for 60 s; the stream is writable again 4-7 s after its leader's link is cut)
PLACEMENTS_SETTLE_S = 20.0


@dataclass
class Plan:
    warmup_s: float = 4.0  # load before the first fault
    gap_s: float = 3.0  # between the link cut and the engine kill
    tail_s: float = 6.0  # load after the engine kill (programs in flight then run to their end)
    # then its agent is started again on the same host, as systemd or the kubelet would: it replays
    # the completions its outbox kept (services/engine_agent/outbox.py); None: it stays dead
    restart_after_s: float | None = 1.0
    restore_link: bool = True  # bring the cut node back at the end and report its catch-up
    workload: WorkloadSpec = field(default_factory=lambda: WorkloadSpec(
        concurrency=6, calls_per_program=4, max_tokens=16, prompt_chars=200, fork_every=0, attempt_timeout_s=20.0))


async def run(root: Path, database_url: str, plan: Plan) -> dict:
    keys = {"acme": f"sk-acme-{secrets.token_urlsafe(12)}", "globex": f"sk-globex-{secrets.token_urlsafe(12)}"}
    mesh = MultiHostMesh(root=root, database_url=database_url, tenant_keys=keys)
    try:
        startup_s = await mesh.up()
        return await _drive(mesh, plan, startup_s)
    finally:
        mesh.down()


async def _drive(mesh: MultiHostMesh, plan: Plan, startup_s: float) -> dict:
    bus = await Bus.connect(mesh.admin_url, service="multihost", connect_timeout_s=5.0)
    try:
        streams_before = {s: await observe.stream_state(bus, s) for s in (subjects.AUDIT_STREAM,
                                                                           subjects.COMPLETIONS_STREAM)}
        tally, timings, done = Tally(), [], asyncio.Event()
        probes = await _start_probes(mesh, done)
        t0 = time.monotonic()
        load = asyncio.create_task(run_load(mesh.api_url, list(mesh.tenant_keys.values()), plan.workload, done,
                                            tally, timings))
        await asyncio.sleep(plan.warmup_s)
        cut_host = await observe.stream_leader(bus, subjects.COMPLETIONS_STREAM)
        cut_at, cut_wall = time.monotonic(), time.time()
        mesh.host(cut_host).cut()
        await asyncio.sleep(plan.gap_s)
        killed = f"engine_agent@{LOST_ENGINE_HOST}"
        kill_at = time.monotonic()
        mesh.kill(killed)
        killed_log = mesh.processes[killed].log_path
        restart_at = None
        if plan.restart_after_s is not None:
            await asyncio.sleep(plan.restart_after_s)
            restart_at = time.monotonic()
            mesh.restart(killed)
        await asyncio.sleep(plan.tail_s - (plan.restart_after_s or 0.0))
        done.set()
        await load
        load_s = time.monotonic() - t0
        ticks, leaders = await _stop_probes(probes)
        mesh.check_alive(allowed_dead=set() if restart_at else {killed})
        audit_t0 = time.monotonic()
        ledger = await audit(mesh.database_url, tally.completed_call_ids, tally.sessions)
        completed_on = await observe.completing_engines(mesh.database_url, sorted(tally.sessions))
        routed, routed_read = await observe.placements_settled(bus, set(completed_on), PLACEMENTS_SETTLE_S)
        streams_after_faults = {s: await observe.stream_state(bus, s) for s in (subjects.AUDIT_STREAM,
                                                                                 subjects.COMPLETIONS_STREAM)}
        audit_s = time.monotonic() - audit_t0
        catch_up = await _restore(mesh, bus, cut_host) if plan.restore_link else None
    finally:
        await bus.close()
    spans = [Span(t.start, t.end, t.completed) for t in timings]
    rec = recovery(spans, [cut_at, kill_at])
    lost = tally.no_answer + ledger.lost_completions + tally.calls_given_up
    return {
        "startup_s": startup_s,
        "load_s": round(load_s, 1),
        "audit_s": round(audit_s, 1),
        "faults": [{"kind": "link_cut", "host": cut_host, "why": "leader of the completions stream",
                    "at_s": round(cut_at - t0, 2)},
                   {"kind": "engine_kill", "host": LOST_ENGINE_HOST, "at_s": round(kill_at - t0, 2)},
                   *([{"kind": "engine_restart", "host": LOST_ENGINE_HOST, "at_s": round(restart_at - t0, 2)}]
                     if restart_at else [])],
        "outbox": observe.outbox_replays(killed_log),
        # per service: from the cut to its client noticing (pings unanswered) and reconnecting elsewhere
        "reconnects_after_cut_s": observe.reconnects(mesh.root / "logs", cut_wall, load_s - (cut_at - t0)),
        # per surviving node's client: seconds from the cut until it saw the completions stream's new leader
        "completions_leader_after_cut_s": {node: observe.new_leader_after(node_ticks, cut_at, cut_host)
                                           for node, node_ticks in leaders.items() if node != cut_host},
        "calls": {"logical": len(timings), "completed": sum(t.completed for t in timings),
                  "attempts": tally.submitted, "failed_retryable": tally.failed_retryable,
                  "failed_other": tally.failed_other, "errors_seen": dict(sorted(tally.errors.items()))},
        "lost": lost,
        "lost_detail": {"no_answer": tally.no_answer, "completion_missing_in_db": ledger.lost_completions,
                        "calls_given_up": tally.calls_given_up},
        "double_counted": ledger.double_counted,
        "mismatches": ledger.mismatches[:20],
        "orphan_completions": ledger.orphan_completions,
        "calls_in_db": ledger.calls_in_table,
        "programs": {"started": tally.programs_started, "completed": tally.programs_completed,
                     "checked_in_db": ledger.programs_checked},
        "lost_engine": observe.redispatch_summary(routed, completed_on, LOST_ENGINE_HOST),
        "engines_seen": sorted({e for engines in routed.values() for e in engines}),
        # completions the client saw whose row never came: where each call had been placed
        "lost_calls": [{"call_id": c, "routed_to": routed.get(c, [])}
                       for c in tally.completed_call_ids if c not in completed_on][:50],
        "audit_stream": {"db_calls_without_routed_event": sum(1 for c in completed_on if c not in routed),
                         "routed_calls": len(routed), "routed_read": routed_read,
                         # each such call and the engines whose rows hold it, to find it in the logs
                         "calls_without_routed_event": {c: completed_on[c] for c in sorted(completed_on)
                                                        if c not in routed}},
        "recovery": asdict(rec),
        # per node, the longest time the audit stream took no write through it, across the cut
        "audit_stream_outage_s": {node: longest_outage([(t["t"], t["ok"]) for t in node_ticks], cut_at)
                                  for node, node_ticks in ticks.items()},
        "streams": {"before": streams_before, "after_faults": streams_after_faults, "after_restore": catch_up},
        "plan": {"warmup_s": plan.warmup_s, "gap_s": plan.gap_s, "tail_s": plan.tail_s,
                 "restart_after_s": plan.restart_after_s,
                 "workload": asdict(plan.workload)},
        "layout": {h.name: h.address for h in mesh.hosts},
        # the calls in flight at a fault, each attempt's (sent, answered, outcome) in seconds since the fault
        "hit_calls": observe.hit_calls(timings, {"link_cut": cut_at, "engine_kill": kill_at}),
        "timings": [{"start": round(t.start - t0, 3), "end": round(t.end - t0, 3), "completed": t.completed,
                     "attempts": len(t.attempts)} for t in timings],
    }


async def _start_probes(mesh: MultiHostMesh, stop: asyncio.Event) -> dict:
    """One probe per NATS node, each on a connection to that node alone (audit writes, and the
    completions stream's leader as that node reports it)."""
    probes = {}
    for host in mesh.nats_hosts:
        url = with_credentials(f"nats://{host.address}:{CLIENT_PORT}", ADMIN, mesh.credentials.passwords[ADMIN])
        bus = await Bus.connect(url, service="multihost-probe", connect_timeout_s=5.0)
        probes[host.name] = (bus, asyncio.create_task(observe.probe_audit_stream(bus, host.name, stop)),
                             asyncio.create_task(observe.watch_leader(bus, subjects.COMPLETIONS_STREAM, stop)))
    return probes


async def _stop_probes(probes: dict) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    ticks, leaders = {}, {}
    for node, (bus, probe, leader) in probes.items():
        ticks[node], leaders[node] = await probe, await leader
        await bus.close()
    return ticks, leaders


async def _restore(mesh: MultiHostMesh, bus: Bus, host: str, timeout_s: float = 30.0) -> dict:
    """Bring the cut node's link back; wait until its replicas are current again (or time out)."""
    mesh.host(host).restore()
    t0 = time.monotonic()
    state: dict = {}
    while time.monotonic() - t0 < timeout_s:
        state = {s: await observe.stream_state(bus, s) for s in (subjects.AUDIT_STREAM, subjects.COMPLETIONS_STREAM)}
        peers = [p for s in state.values() for p in s["peers"]]
        if len(peers) == 2 * 2 and all(p["current"] and not p["offline"] for p in peers):
            break
        await asyncio.sleep(0.5)
    return {"caught_up_s": round(time.monotonic() - t0, 2), **state}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = asyncio.run(run(args.root, args.database_url, Plan()))
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
