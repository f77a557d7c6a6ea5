"""The ceilings that bound the process table's events/s, on its own servers in the same run:
batched PostgreSQL upserts of the same rows (`pg_upserts`) and JetStream pull+ack alone
(`jetstream_rates`, with the bytes of the completion events the table consumes). Each comes with
the CPU per event of the processes involved; a run that fails gives {"error": ...} and no ratio.
"""

from __future__ import annotations

import time
import uuid

from loadgen.bench import jetstream_rates, pg_upserts
from loadgen.bench.cpu import CpuWindow
from loadgen.bench.mesh_ceilings import guarded
from loadgen.bench.spread import ratio
from shared.protocol import messages as m
from shared.protocol.envelope import Publisher


def completion_bytes() -> bytes:
    """One call-completed event as an engine publishes it."""
    return Publisher(f"bench-{uuid.uuid4().hex[:6]}").encode(m.CallCompleted(
        call_id=f"c-{uuid.uuid4().hex}", program_id=f"p-{uuid.uuid4().hex[:12]}", thread_id="main",
        tenant="bench", engine_id="e0", service_s=0.01, wait_s=0.005, prompt_tokens=512, output_tokens=64,
        thread_service_at_submit_s=None, submit_epoch=0, completed_at_ns=time.time_ns()))


async def measure(nats_url: str, database_url: str, servers: dict[str, int], num_events: int, num_programs: int,
                  batch_size: int, js_messages: int) -> dict:
    """{"upsert": ..., "jetstream": ...}; `servers` names the server pids for CPU (postgres, nats_server)."""
    pg_pids = {k: v for k, v in servers.items() if k == "postgres"}
    nats_pids = {k: v for k, v in servers.items() if k == "nats_server"}

    async def upsert() -> dict:
        result = await pg_upserts.upsert_rate(database_url, num_events, num_programs, batch_size,
                                              CpuWindow(pg_pids).start())
        return {**result, "events": num_events, "cpu_us_per_event": _us(result.pop("cpu_ms_per_event"))}

    async def jetstream() -> dict:
        window = CpuWindow(nats_pids).start()
        result = await jetstream_rates.measure(nats_url, completion_bytes(), js_messages, batch_size)
        # CPU over both halves (publish, then pull+ack) per message
        return {**result, "cpu_us_per_message": _us(window.per_unit_ms(js_messages))}

    return {"upsert": await guarded("batched upserts", upsert),
            "jetstream": await guarded("JetStream pull+ack", jetstream)}


def fractions(events_per_s: float, ceilings: dict) -> dict:
    """The table's rate over each ceiling (None where that run failed) and the one that binds."""
    out = {"upsert": ratio(events_per_s, ceilings["upsert"].get("per_s")),
           "jetstream_pull_ack": ratio(events_per_s, ceilings["jetstream"].get("pull_ack_per_s"))}
    known = {k: v for k, v in out.items() if v is not None}
    out["bound_by"] = max(known, key=known.get) if known else None
    out["of_bound"] = known[out["bound_by"]] if known else None
    return out


def _us(per_unit_ms: dict[str, float]) -> dict[str, float]:
    return {k: round(v * 1e3, 1) for k, v in per_unit_ms.items()}
