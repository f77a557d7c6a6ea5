"""The same-run ceilings on real servers (NATS and PostgreSQL from the fixtures), at a tiny size:
they run and count what they should; no timing is asserted. A ceiling run that fails gives no ratio."""

from __future__ import annotations

import asyncio

import nats
import pytest

from loadgen.bench import jetstream_rates, nats_echo, pg_upserts, servers
from loadgen.bench.mesh_ceilings import guarded
from loadgen.bench.spread import ratio, summarize_runs, summary
from loadgen.bench.table_ceilings import completion_bytes, fractions


async def test_jetstream_publish_and_pull_ack_count_every_message(nats_url):
    result = await jetstream_rates.measure(nats_url, completion_bytes(), num=300, batch=128)
    assert result["messages"] == 300 and result["publish_per_s"] > 0 and result["pull_ack_per_s"] > 0


async def test_nats_request_reply_against_a_responder_process(nats_url):
    proc = servers.start_module("loadgen.bench.nats_echo", "--url", nats_url, "--subject", "autellix_bench.echo.t",
                                "--reply-bytes", "16", ready_line="ready")
    try:
        nc = await nats.connect(nats_url)
        try:
            rate, latencies = await nats_echo.request_rate(nc, "autellix_bench.echo.t", b"x" * 100, 0.3, 4)
        finally:
            await nc.close()
    finally:
        servers.stop(proc)
    assert rate > 0 and latencies


async def test_batched_upserts_insert_every_call_once(database_url, postgres_server):
    result = await pg_upserts.upsert_rate(database_url, num_events=500, num_programs=20, batch_size=128)
    assert result["batches"] == 4 and result["per_s"] > 0
    db = postgres_server.database_of(database_url)
    count = postgres_server.admin_sql("SELECT count(*) FROM calls WHERE call_id LIKE 'ceil%';", db)
    assert "500" in count
    sums = postgres_server.admin_sql("SELECT sum(num_completed_calls) FROM programs WHERE id LIKE 'ceil%';", db)
    assert "500" in sums


async def test_a_failed_ceiling_run_says_so_and_gives_no_ratio():
    async def unreachable() -> dict:
        return await asyncio.wait_for(jetstream_rates.measure("nats://127.0.0.1:1", b"x", 10, 10), 3)

    failed = await guarded("JetStream", unreachable)
    assert failed["error"].startswith("JetStream:")
    out = fractions(1000.0, {"upsert": {"per_s": 4000.0}, "jetstream": failed})
    assert out["jetstream_pull_ack"] is None and out["upsert"] == pytest.approx(0.25)
    assert out["bound_by"] == "upsert"
    assert ratio(1.0, None) is None and ratio(1.0, 0.0) is None


def test_spread_of_repeats():
    s = summary([90.0, 100.0, 110.0])
    assert (s["min"], s["median"], s["max"], s["spread"]) == (90.0, 100.0, 110.0, 0.2)
    assert summary([None, float("nan")])["median"] is None
    nested = summarize_runs([{"a": {"b": 1.0}, "who": "x"}, {"a": {"b": 3.0}, "who": "y"}])
    assert nested["a"]["b"]["median"] == 2.0 and nested["who"] == {"runs": ["x", "y"]}


async def test_both_pull_paths_pull_and_ack_the_whole_backlog(nats_url):
    from loadgen.bench import pull_paths

    result = await pull_paths.compare(nats_url, num=300, batch=128, repeats=1)
    for path in pull_paths.PATHS:
        [run] = result["runs"][path]
        assert run["per_s"] > 0 and run["cpu_us_per_message"] > 0
