"""What the NATS fuzzer measures on a live mesh: the durable state before and after (every table of
the process table's database, row by row), and whether every consumer still answers and consumes.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import httpx
from nats.aio.client import Client

from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import Publisher, decode
from shared.protocol.nats_roles import OWNED_DURABLES


def _libpq(database_url: str) -> str:
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def table_digests(database_url: str) -> dict[str, dict]:
    """Every table (the schema's version aside): its row count and an md5 over its rows in order,
    so any insert, update or delete shows."""
    conn = await asyncpg.connect(_libpq(database_url))
    try:
        names = [r["table_name"] for r in await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE' AND table_name <> 'alembic_version' ORDER BY table_name")]
        out = {}
        for name in names:
            row = await conn.fetchrow(
                f'SELECT count(*) AS n, md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) AS digest '
                f'FROM "{name}" t')
            out[name] = {"rows": row["n"], "md5": row["digest"]}
        return out
    finally:
        await conn.close()


def changed_tables(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict]:
    return {name: {"before": before.get(name), "after": after.get(name)}
            for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)}


async def health_answers(nc: Client, services: list[str], window_s: float = 1.5) -> dict[str, int]:
    """How many instances of each service answer a health check (every instance answers)."""
    publisher = Publisher("fuzz.health")
    counts = {s: 0 for s in services}
    inbox = nc.new_inbox()

    async def on_reply(raw) -> None:
        try:
            body = decode(raw.data).body
        except Exception:
            return
        if isinstance(body, m.HealthStatus) and body.ok and body.service in counts:
            counts[body.service] += 1
    sub = await nc.subscribe(inbox, cb=on_reply)
    for service in services:
        await nc.publish(subjects.health(service), publisher.encode(m.HealthCheck()), reply=inbox)
    await nc.flush()
    await asyncio.sleep(window_s)
    await sub.unsubscribe()
    return counts


async def durable_backlogs(nc: Client) -> dict[str, dict]:
    """Each durable consumer's backlog: messages not yet delivered, and delivered but not acknowledged
    (a message its consumer cannot get past would stay in one of them)."""
    js = nc.jetstream()
    out = {}
    for pairs in OWNED_DURABLES.values():
        for stream, durable in pairs:
            info = await js.consumer_info(stream, durable)
            out[durable] = {"num_pending": info.num_pending, "num_ack_pending": info.num_ack_pending,
                            "num_redelivered": info.num_redelivered}
    return out


async def wait_backlogs_drained(nc: Client, timeout_s: float = 15.0) -> dict[str, dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        backlogs = await durable_backlogs(nc)
        drained = all(b["num_pending"] == 0 and b["num_ack_pending"] == 0 for b in backlogs.values())
        if drained or time.monotonic() > deadline:
            return backlogs
        await asyncio.sleep(0.25)


async def session_with_one_call(api_url: str, api_key: str, timeout_s: float = 30.0) -> dict:
    """A session, one call in it, and its view once the process table has applied the call: the
    whole path (API, router, engine, completions consumer) still works end to end."""
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(base_url=api_url, timeout=timeout_s) as http:
        sid = (await http.post("/v1/sessions", headers=headers)).raise_for_status().json()["id"]
        models = (await http.get("/v1/models", headers=headers)).json()["data"]
        answer = await http.post("/v1/chat/completions", headers=headers, json={
            "model": models[0]["id"], "max_tokens": 4, "session_id": sid,
            "messages": [{"role": "user", "content": "a call after the fuzzing"}]})
        if answer.status_code != 200:
            return {"session_id": sid, "call_status": answer.status_code, "applied": False, "detail": answer.text[:300]}
        deadline = time.monotonic() + timeout_s
        view = {}
        while time.monotonic() < deadline:
            view = (await http.get(f"/v1/sessions/{sid}", headers=headers)).json()
            if view.get("num_calls", 0) >= 1 and view.get("attained_service_s", 0) > 0:
                break
            await asyncio.sleep(0.1)
        return {"session_id": sid, "call_status": 200,
                "applied": view.get("num_calls", 0) >= 1 and view.get("attained_service_s", 0) > 0,
                "attained_service_s": view.get("attained_service_s")}
