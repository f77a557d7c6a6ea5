"""The PostgreSQL path (set-based batches) against the pure core's ledger, plus idempotency."""

from __future__ import annotations

import asyncio
import random

import pytest
from sqlalchemy.exc import DBAPIError

from services.process_table import sessions
from services.process_table.apply import BatchApplier, Turn
from services.process_table.db import create_engine
from services.process_table.fold import Completion, ProgramRow
from services.process_table.repository import StaleProgramState, apply_completions
from shared.core.program import ServiceAggregation
from tests.process_table.sequences import (
    Promotion,
    random_program_events,
    reference_fold,
    shuffled_with_duplicates,
    split_batches,
    with_promotions,
)


@pytest.fixture
async def engine(database_url):
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


async def _open_sessions(engine, aggregation: dict[str, ServiceAggregation]) -> None:
    async with engine.begin() as conn:
        for program_id, agg in aggregation.items():
            await sessions.open_session(conn, program_id=program_id, aggregation=agg.value)


async def _apply_units(engine, units, applier: BatchApplier | None = None) -> None:
    """Through the general path alone, or through the service's applier (fast path when cached)."""
    for unit in units:
        if isinstance(unit, Promotion):
            async with engine.begin() as conn:
                await sessions.promote(conn, unit.program_id)
            if applier is not None:
                applier.forget(unit.program_id)
        elif applier is not None:
            await applier.apply(unit)
        else:
            async with engine.begin() as conn:
                await apply_completions(conn, unit)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("path", ["general", "applier"])
async def test_database_matches_ledger_on_random_sequences(engine, seed: int, path: str) -> None:
    rng = random.Random(seed)
    aggregation = {f"s{seed}-p{i}": rng.choice(list(ServiceAggregation)) for i in range(4)}
    await _open_sessions(engine, aggregation)
    events = [e for p in aggregation for e in random_program_events(rng, p, rng.randint(5, 60))]
    steps = with_promotions(rng, shuffled_with_duplicates(rng, events), list(aggregation), 4)
    applier = BatchApplier(engine) if path == "applier" else None
    await _apply_units(engine, split_batches(rng, steps, max_batch=50), applier)
    expected = reference_fold(steps, aggregation)
    async with engine.connect() as conn:
        for program_id, ledger in expected.items():
            view = await sessions.lookup(conn, program_id)
            assert view.service_s == pytest.approx(ledger.service_s, abs=1e-9)
            assert view.wait_s == pytest.approx(ledger.wait_s, abs=1e-9)
            assert (view.epoch, view.promotions) == (ledger.epoch, ledger.promotions)
            assert view.num_completed_calls == ledger.num_completed_calls
            assert view.thread_service_s == pytest.approx(ledger.thread_service_s, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
async def test_fast_path_matches_ledger_without_duplicates(engine, seed: int) -> None:
    """Redelivery-free streams stay on the one-statement fast path after each program's first batch."""
    rng = random.Random(100 + seed)
    aggregation = {f"f{seed}-p{i}": rng.choice(list(ServiceAggregation)) for i in range(3)}
    await _open_sessions(engine, aggregation)
    events = [e for p in aggregation for e in random_program_events(rng, p, 80)]
    rng.shuffle(events)
    steps = with_promotions(rng, events, list(aggregation), 2)
    applier = BatchApplier(engine)
    await _apply_units(engine, split_batches(rng, steps, max_batch=12), applier)
    assert applier.num_fast > applier.num_general
    expected = reference_fold(steps, aggregation)
    async with engine.connect() as conn:
        for program_id, ledger in expected.items():
            view = await sessions.lookup(conn, program_id)
            assert view.service_s == pytest.approx(ledger.service_s, abs=1e-9)
            assert view.wait_s == pytest.approx(ledger.wait_s, abs=1e-9)
            assert (view.epoch, view.num_completed_calls) == (ledger.epoch, ledger.num_completed_calls)
            assert view.thread_service_s == pytest.approx(ledger.thread_service_s, abs=1e-9)


async def test_order_independent_state_is_the_same_under_shuffles(engine) -> None:
    """PLAS sums and ATLAS with explicit submit bases do not depend on delivery order."""
    rng = random.Random(7)
    finals = []
    for attempt in range(3):
        programs = {f"sum-{attempt}": ServiceAggregation.SUM, f"cp-{attempt}": ServiceAggregation.CRITICAL_PATH}
        async with engine.begin() as conn:
            for program_id, agg in programs.items():
                await sessions.open_session(conn, program_id=program_id, aggregation=agg.value)
        base_rng = random.Random(99)  # same events every attempt, different order and duplicates
        events = []
        for program_id in programs:
            for e in random_program_events(base_rng, "x", 30):
                base = e.thread_service_at_submit_s if e.thread_service_at_submit_s is not None else 1.0
                events.append(Completion(call_id=f"{program_id}/{e.call_id}", program_id=program_id,
                                         thread_id=e.thread_id, service_s=e.service_s, wait_s=e.wait_s,
                                         thread_service_at_submit_s=base))
        stream = shuffled_with_duplicates(rng, events, dup_fraction=0.5)
        await _apply_units(engine, split_batches(rng, stream, max_batch=20))
        async with engine.connect() as conn:
            views = [await sessions.lookup(conn, p) for p in programs]
        finals.append([(round(v.service_s, 9), round(v.wait_s, 9), v.num_completed_calls) for v in views])
    assert finals[0] == finals[1] == finals[2]


async def test_redelivered_completion_counts_once(engine) -> None:
    call = Completion(call_id="c1", program_id="p1", thread_id="main", service_s=2.0, wait_s=1.0,
                      prompt_tokens=10, output_tokens=5, engine_id="e7")
    async with engine.begin() as conn:
        first = (await apply_completions(conn, [call, call])).updates  # duplicated inside one batch
    async with engine.begin() as conn:
        second = (await apply_completions(conn, [call])).updates  # and redelivered later
    applier = BatchApplier(engine)
    applier.cache.put([ProgramRow("p1", ServiceAggregation.CRITICAL_PATH, service_s=2.0, wait_s=1.0,
                                  num_completed_calls=1, thread_service_s={"main": 2.0})])
    third = await applier.apply([call])  # a redelivery on the fast path: it misses, nothing counts twice
    assert [u.applied_call_ids for u in first] == [["c1"]]
    assert second == [] and third == [] and applier.num_general == 1
    async with engine.connect() as conn:
        view = await sessions.lookup(conn, "p1")
    assert (view.service_s, view.wait_s, view.num_completed_calls) == (2.0, 1.0, 1)
    assert view.primary_engine == "e7" and view.tenant_id == "default"  # created by its first completion


async def test_promotion_resets_and_invalidates_stale_bases(engine) -> None:
    async with engine.begin() as conn:
        await sessions.open_session(conn, program_id="p", aggregation="critical_path")
        await apply_completions(conn, [Completion("c1", "p", "main", 4.0, 30.0, submit_epoch=0,
                                                  thread_service_at_submit_s=0.0)])
    async with engine.begin() as conn:
        promoted = await sessions.promote(conn, "p", from_epoch=0)
        assert await sessions.promote(conn, "p", from_epoch=0) is None  # a redelivered promotion
    assert (promoted.service_s, promoted.wait_s, promoted.epoch, promoted.promotions) == (0.0, 0.0, 1, 1)
    assert promoted.thread_service_s == {"main": 0.0}
    async with engine.begin() as conn:  # submitted before the promotion: its base 4.0 is stale
        await apply_completions(conn, [Completion("c2", "p", "main", 1.0, 0.0, submit_epoch=0,
                                                  thread_service_at_submit_s=4.0)])
        view = await sessions.lookup(conn, "p")
    assert view.service_s == 1.0 and view.thread_service_s == {"main": 1.0}


async def test_concurrent_writers_never_lose_or_double_count(engine) -> None:
    """Two appliers (two instances) race on the same programs; optimistic version checks make the
    loser retry, so the order-independent totals equal the core's."""
    rng = random.Random(11)
    aggregation = {"race-sum": ServiceAggregation.SUM, "race-cp": ServiceAggregation.CRITICAL_PATH}
    await _open_sessions(engine, aggregation)
    events = [Completion(call_id=f"{p}-{i}", program_id=p, thread_id=f"t{i % 3}", service_s=rng.uniform(0, 2),
                         wait_s=rng.uniform(0, 1), thread_service_at_submit_s=rng.uniform(0, 5))
              for p in aggregation for i in range(120)]
    stream = shuffled_with_duplicates(rng, events, dup_fraction=0.5)
    halves = [stream[0::2], stream[1::2]]
    conflicts = 0

    async def writer(part: list[Completion]) -> None:
        nonlocal conflicts
        applier = BatchApplier(engine)  # one per instance, each with its own cache
        for i in range(0, len(part), 7):
            while True:
                try:
                    await applier.apply(part[i:i + 7])
                    break
                except StaleProgramState:
                    conflicts += 1
                except DBAPIError as exc:  # a deadlock: the table's own loop retries any failed batch
                    if getattr(exc.orig, "sqlstate", "") != "40P01":
                        raise
                    conflicts += 1

    await asyncio.gather(writer(halves[0]), writer(halves[1]))
    expected = reference_fold(stream, aggregation)
    async with engine.connect() as conn:
        for program_id, ledger in expected.items():
            view = await sessions.lookup(conn, program_id)
            assert view.num_completed_calls == 120
            assert view.service_s == pytest.approx(ledger.service_s, abs=1e-9)
            assert view.wait_s == pytest.approx(ledger.wait_s, abs=1e-9)
            assert view.thread_service_s == pytest.approx(ledger.thread_service_s, abs=1e-9)


async def test_a_batch_read_before_a_promotion_commits_is_retried_not_written(engine) -> None:
    """The promotion holds the row lock from its read to its commit: a completion batch that read
    the row meanwhile fails its version check (the epoch) and writes nothing."""
    async with engine.begin() as conn:
        await sessions.open_session(conn, program_id="pr", aggregation="sum")
        await apply_completions(conn, [Completion("pr-1", "pr", "main", 3.0, 1.0)])
    async with engine.connect() as promoting:
        await promoting.begin()
        promoted = await sessions.promote(promoting, "pr", from_epoch=0)
        assert (promoted.service_s, promoted.epoch) == (0.0, 1)

        async def complete() -> None:
            async with engine.begin() as conn:
                await apply_completions(conn, [Completion("pr-2", "pr", "main", 2.0, 0.0)])

        batch = asyncio.create_task(complete())
        await asyncio.sleep(0.3)  # the batch has read the old row and waits on the lock
        assert not batch.done()
        await promoting.commit()
        with pytest.raises(StaleProgramState):
            await batch
    async with engine.begin() as conn:
        await apply_completions(conn, [Completion("pr-2", "pr", "main", 2.0, 0.0)])  # the retry
        view = await sessions.lookup(conn, "pr")
    assert (view.service_s, view.wait_s, view.epoch, view.num_completed_calls) == (2.0, 0.0, 1, 2)


async def _apply_pipelined(applier: BatchApplier, batches: list[list[Completion]], depth: int = 2) -> None:
    """As the service's apply loop: each batch starts while up to `depth - 1` before it are in the
    database (`Turn`), and a failed one is retried once the one before is done."""
    slots = asyncio.Semaphore(depth)
    tasks: list[asyncio.Task] = []
    turn: Turn | None = None

    async def one(batch: list[Completion], turn: Turn) -> None:
        try:
            while True:
                try:
                    await applier.apply(batch, turn)
                    return
                except StaleProgramState:
                    await turn.wait_done()
        finally:
            turn.finish()
            slots.release()

    for batch in batches:
        await slots.acquire()
        turn = Turn(turn)
        tasks.append(asyncio.create_task(one(batch, turn)))
    await asyncio.gather(*tasks)


@pytest.mark.parametrize("seed", range(3))
async def test_pipelined_batches_fold_on_the_rows_in_flight_and_match_the_ledger(engine, seed: int) -> None:
    """Two batches in the database at once: the second folds on the rows the first is writing,
    its update waits for the first's commit and finds that version, so both stay on the fast path."""
    rng = random.Random(300 + seed)
    aggregation = {f"pipe{seed}-p{i}": rng.choice(list(ServiceAggregation)) for i in range(4)}
    await _open_sessions(engine, aggregation)
    events = [e for p in aggregation for e in random_program_events(rng, p, 60)]
    rng.shuffle(events)
    batches = [events[i:i + 24] for i in range(0, len(events), 24)]
    applier = BatchApplier(engine)
    await _apply_pipelined(applier, batches)
    assert applier.num_general <= 1  # the first batch reads the rows; every later one folds on the cache
    expected = reference_fold(events, aggregation)
    async with engine.connect() as conn:
        for program_id, ledger in expected.items():
            view = await sessions.lookup(conn, program_id)
            assert view.num_completed_calls == ledger.num_completed_calls
            assert view.service_s == pytest.approx(ledger.service_s, abs=1e-9)
            assert view.thread_service_s == pytest.approx(ledger.thread_service_s, abs=1e-9)
