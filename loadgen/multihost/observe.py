"""What the run reads back from the cluster: where each call was placed (the audit stream's
`call.routed` events), which engine completed it (the process table's call rows), and the streams'
replica state."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
import uuid
from datetime import datetime
from pathlib import Path

import nats.js.errors
from nats.js import api
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import create_async_engine

from shared.bus import Bus, pull
from shared.bus.admission import Refusal
from shared.protocol import messages as m
from shared.protocol import subjects

ROUTED_READ_DEADLINE_S = 60.0  # reading every stored placement back; a busy cluster takes seconds


async def routed_engines(bus: Bus) -> tuple[dict[str, list[str]], dict]:
    """call id -> the engines it was placed on, in order (a re-dispatch adds one), read until every
    placement the stream held when the read began is in (not until a quiet pause, which a busy
    server can make early); and {stored, read, complete} to tell a short read from a missing event."""
    filter_subject = f"{subjects.PREFIX}.events.*.{m.CallRouted.TYPE}"
    info = await bus.js.stream_info(subjects.AUDIT_STREAM, subjects_filter=filter_subject)
    stored = sum((info.state.subjects or {}).values())
    name = f"multihost_routed_{uuid.uuid4().hex[:10]}"  # a reader of its own, gone once idle
    config = api.ConsumerConfig(name=name, ack_policy=api.AckPolicy.NONE, deliver_policy=api.DeliverPolicy.ALL,
                                filter_subject=filter_subject, inactive_threshold=60.0)

    def arrive(raw):
        admitted = bus.admit(raw.subject, "", raw.data, (m.CallRouted,))
        if type(admitted) is Refusal:  # no acks on this reader: reject, nothing to terminate
            return pull.Dropped(functools.partial(bus.refuse, raw.subject, "", admitted))
        return admitted
    consumer = pull.PullConsumer(bus, subjects.AUDIT_STREAM, config, batch_size=1000, arrive=arrive)
    await consumer.start()
    out: dict[str, list[str]] = {}
    read = 0
    deadline = asyncio.get_running_loop().time() + ROUTED_READ_DEADLINE_S
    try:
        while read + consumer.num_dropped < stored:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            try:
                batch = await asyncio.wait_for(consumer.take(), left)
            except TimeoutError:
                break
            for incoming in batch:
                out.setdefault(incoming.body.call_id, []).append(incoming.body.engine_id)
            read += len(batch)
    finally:
        await consumer.stop()
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await bus.js.delete_consumer(subjects.AUDIT_STREAM, name)
    return out, {"stored": stored, "read": read, "refused": consumer.num_dropped,
                 "complete": read + consumer.num_dropped >= stored}


async def placements_settled(bus: Bus, call_ids: set[str], settle_s: float) -> tuple[dict[str, list[str]], dict]:
    """`routed_engines`, read again each second while a call of `call_ids` has no placement yet,
    for at most `settle_s`. A placement published into a cut link reaches the stream when its
    publisher's resend finds a leader (`shared/bus/resend.py`: every 2 s, for up to 60 s), which can
    be after the load ends; one missing past `settle_s` is reported missing."""
    t0 = time.monotonic()
    routed, read = await routed_engines(bus)
    first_missing = sum(1 for c in call_ids if c not in routed)
    while any(c not in routed for c in call_ids) and time.monotonic() - t0 < settle_s:
        await asyncio.sleep(1.0)
        routed, read = await routed_engines(bus)
    return routed, {**read, "missing_at_first_read": first_missing,
                    "read_for_s": round(time.monotonic() - t0, 1)}


async def completing_engines(database_url: str, session_ids: list[str]) -> dict[str, str]:
    """call id -> the engine whose completion the process table applied."""
    if not session_ids:
        return {}
    engine = create_async_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT call_id, engine_id FROM calls WHERE program_id IN :ids")
                                       .bindparams(bindparam("ids", expanding=True)), {"ids": session_ids})).all()
    finally:
        await engine.dispose()
    return {r.call_id: r.engine_id or "" for r in rows}


async def stream_state(bus: Bus, stream: str) -> dict:
    info = await bus.js.stream_info(stream)
    cluster = info.cluster
    return {"replicas": info.config.num_replicas, "messages": info.state.messages,
            "leader": cluster.leader if cluster else None,
            "peers": [{"name": p.name, "current": p.current, "offline": p.offline, "lag": p.lag}
                      for p in (cluster.replicas or [])] if cluster else []}


async def stream_leader(bus: Bus, stream: str) -> str:
    info = await bus.js.stream_info(stream)
    if info.cluster is None or not info.cluster.leader:
        raise RuntimeError(f"stream {stream} has no cluster leader")
    return info.cluster.leader


def redispatch_summary(routed: dict[str, list[str]], completed_on: dict[str, str], lost_engine: str) -> dict:
    """Calls placed on the lost engine: answered by another one (re-dispatched), or by that engine
    id (before it died, or by its agent started again), or never (the client retried them as new
    calls). `placed_again_and_completed`: re-placed by the API (routed twice or more) and answered,
    on whichever engine, the restarted one included."""
    on_lost = [c for c, engines in routed.items() if lost_engine in engines]
    moved = [c for c in on_lost if completed_on.get(c) not in (None, lost_engine)]
    return {"placed_on_lost_engine": len(on_lost),
            "completed_by_that_engine_id": sum(1 for c in on_lost if completed_on.get(c) == lost_engine),
            "redispatched_and_completed_elsewhere": len(moved),
            "placed_again_and_completed": sum(1 for c in on_lost if len(routed[c]) > 1 and c in completed_on),
            "placed_there_never_completed": sum(1 for c in on_lost if c not in completed_on),
            "routed_twice_or_more": sum(1 for engines in routed.values() if len(engines) > 1)}


PROBE_SUBJECT = f"{subjects.PREFIX}.events.multihost-probe.probe.ping"  # stored in the audit stream


async def probe_audit_stream(bus: Bus, node: str, stop, interval_s: float = 0.25, timeout_s: float = 1.0,
                             clock=None) -> list[dict]:
    """Publish a small ack'd message to the audit stream every `interval_s` through one node until
    `stop` is set; each tick's time, whether JetStream acked it and how fast. The gaps are the
    stream's unavailability as a client of that node sees it."""
    import asyncio
    import time

    clock = clock or time.monotonic
    ticks: list[dict] = []
    while not stop.is_set():
        t = clock()
        try:
            await bus.js.publish(PROBE_SUBJECT, b"{}", timeout=timeout_s)
            ticks.append({"node": node, "t": t, "ok": True, "ack_s": round(clock() - t, 4)})
        except Exception as exc:  # timeout, no responders, disconnected: unavailable at t
            ticks.append({"node": node, "t": t, "ok": False, "error": type(exc).__name__})
        await asyncio.sleep(max(0.0, interval_s - (clock() - t)))
    return ticks


async def watch_leader(bus: Bus, stream: str, stop, interval_s: float = 0.25, clock=None) -> list[dict]:
    """The stream's leader as one node's client sees it, every `interval_s` until `stop` is set
    (None while there is none or the node cannot say): when a new leader took over after a cut."""
    import asyncio
    import time

    clock = clock or time.monotonic
    ticks: list[dict] = []
    while not stop.is_set():
        t = clock()
        try:
            info = await asyncio.wait_for(bus.js.stream_info(stream), timeout=1.0)
            leader = info.cluster.leader if info.cluster else None
        except Exception:  # timeout, no responders, disconnected: no leader seen at t
            leader = None
        ticks.append({"t": t, "leader": leader})
        await asyncio.sleep(max(0.0, interval_s - (clock() - t)))
    return ticks


def new_leader_after(ticks: list[dict], cut_at: float, cut_host: str) -> float | None:
    """Seconds from the cut to the first tick naming a leader other than the cut node."""
    times = [t["t"] - cut_at for t in ticks if t["t"] > cut_at and t["leader"] not in (None, cut_host)]
    return round(min(times), 3) if times else None


def outbox_replays(agent_log: Path) -> dict:
    """What the agents on one host replayed from its completion outbox (their log, console format:
    a restarted agent appends to the killed one's)."""
    replayed: list[str] = []
    for line in _lines(agent_log):
        if "completion_outbox_replayed" in line:
            found = re.search(r"call_ids=\[([^\]]*)\]", line)
            replayed += re.findall(r"'([^']+)'", found.group(1)) if found else []
    return {"replayed_by_restarted_agent": len(replayed), "replayed_call_ids": replayed[:50]}


def reconnects(logs: Path, cut_wall_s: float, until_s: float) -> dict[str, dict]:
    """Per service log: seconds from the cut to its client's first `nats_disconnected` and to the
    `nats_reconnected` after it, up to `until_s` after the cut (None: the client kept its node)."""
    out = {}
    for path in sorted(logs.glob("*@*.log")):
        gone = back = None
        for line in _lines(path):
            stamp, _, rest = line.partition(" ")
            if "nats_disconnected" not in rest and "nats_reconnected" not in rest:
                continue
            try:
                t = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - cut_wall_s
            except ValueError:
                continue
            if t < 0 or t > until_s:
                continue
            if gone is None and "nats_disconnected" in rest:
                gone = round(t, 2)
            elif gone is not None and "nats_reconnected" in rest:
                back = round(t, 2)
                break
        out[path.stem] = {"disconnected_s": gone, "reconnected_s": back}
    return out


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def hit_calls(timings, faults: dict[str, float]) -> list[dict]:
    """Per call in flight at a fault: its recovery and its attempts, times from the fault."""
    out = []
    for kind, at in faults.items():
        for t in timings:
            if t.start <= at < t.end:
                out.append({"fault": kind, "recovery_s": round(t.end - at, 3), "completed": t.completed,
                            "attempts": [(round(a - at, 3), round(b - at, 3), code) for a, b, code in t.attempts]})
    return sorted(out, key=lambda c: -c["recovery_s"])
