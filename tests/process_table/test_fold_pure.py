"""The batch fold equals the core's ledger applied one event at a time (no database)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.process_table.fold import Completion, ProgramRow, fold_completions
from shared.core.program import ServiceAggregation
from tests.process_table.sequences import (
    Promotion,
    random_program_events,
    reference_fold,
    shuffled_with_duplicates,
    split_batches,
    with_promotions,
)


def _fold_in_batches(units, aggregation: ServiceAggregation) -> ProgramRow:
    row = ProgramRow(program_id="p", aggregation=aggregation)
    seen: set[str] = set()
    for unit in units:
        if isinstance(unit, Promotion):
            row.service_s = row.wait_s = 0.0
            row.thread_service_s = {t: 0.0 for t in row.thread_service_s}
            row.promotions += 1
            row.epoch += 1
            continue
        fresh = [c for c in unit if not (c.call_id in seen or seen.add(c.call_id))]
        row = fold_completions(row, fresh).row
    return row


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), aggregation=st.sampled_from(list(ServiceAggregation)),
       num_calls=st.integers(1, 40), num_promotions=st.integers(0, 3), max_batch=st.integers(1, 12))
def test_batched_fold_matches_ledger(seed, aggregation, num_calls, num_promotions, max_batch) -> None:
    rng = random.Random(seed)
    stream = shuffled_with_duplicates(rng, random_program_events(rng, "p", num_calls))
    steps = with_promotions(rng, stream, ["p"], num_promotions)
    expected = reference_fold(steps, {"p": aggregation})["p"]
    row = _fold_in_batches(split_batches(rng, steps, max_batch), aggregation)
    assert row.service_s == expected.service_s
    assert row.wait_s == expected.wait_s
    assert row.epoch == expected.epoch and row.promotions == expected.promotions
    assert row.num_completed_calls == expected.num_completed_calls
    assert row.thread_service_s == expected.thread_service_s


def test_completion_rejects_bad_numbers() -> None:
    with pytest.raises(ValueError):
        Completion(call_id="c", program_id="p", thread_id="main", service_s=-1.0, wait_s=0.0)
    with pytest.raises(ValueError):
        Completion(call_id="c", program_id="p", thread_id="main", service_s=float("nan"), wait_s=0.0)
    with pytest.raises(ValueError):
        Completion(call_id="", program_id="p", thread_id="main", service_s=1.0, wait_s=0.0)


@pytest.mark.parametrize("change", [
    {"service_s": float("inf")}, {"wait_s": -0.5}, {"wait_s": float("nan")},
    {"thread_service_at_submit_s": -1.0}, {"completed_at_s": float("inf")},
    {"prompt_tokens": -1}, {"output_tokens": 2**31}, {"prefix_hit_tokens": 2**40}, {"submit_epoch": -2},
    {"program_id": ""}, {"thread_id": ""}, {"tenant_id": ""}, {"call_id": "x" * 257}, {"engine_id": "e" * 257},
    {"parent_thread_id": "t" * 257}, {"call_id": "a\x00b"}, {"engine_id": "e\x00"}, {"parent_thread_id": "\x00"},
])
def test_completion_rejects_every_bad_field(change) -> None:
    with pytest.raises(ValueError):
        Completion(**{"call_id": "c", "program_id": "p", "thread_id": "main", "service_s": 1.0, "wait_s": 0.0,
                      **change})


def test_completion_takes_the_edges() -> None:
    Completion(call_id="c" * 256, program_id="p", thread_id="main", service_s=0.0, wait_s=0.0, prompt_tokens=2**31 - 1,
               submit_epoch=0, parent_thread_id="", engine_id=None, thread_service_at_submit_s=0.0)
