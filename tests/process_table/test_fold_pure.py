"""The batch fold equals the core's ledger applied one event at a time (no database)."""

from __future__ import annotations

import dataclasses
import random

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.process_table.fold import ProgramRow, fold_completions
from services.process_table.wire import completion_from_wire
from shared.core.program import ServiceAggregation
from shared.protocol import decode
from shared.protocol import messages as m
from shared.protocol.codec import to_map
from shared.protocol.envelope import Publisher
from shared.protocol.errors import ProtocolError
from shared.protocol.ids import DEFAULT_TENANT_ID
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


_GOOD = m.CallCompleted(call_id="c", program_id="p", engine_id="e0", service_s=1.0, wait_s=0.0)


@pytest.mark.parametrize("change", [
    {"service_s": float("inf")}, {"wait_s": -0.5}, {"wait_s": float("nan")}, {"service_s": -1.0},
    {"thread_service_at_submit_s": -1.0}, {"completed_at_ns": -1},
    {"prompt_tokens": -1}, {"output_tokens": 2**31}, {"prefix_hit_tokens": 2**40}, {"submit_epoch": -2},
    {"completed_calls_before": 2**31},
    {"call_id": ""}, {"program_id": ""}, {"thread_id": ""}, {"call_id": "x" * 257}, {"engine_id": "e" * 257},
    {"parent_thread_id": "t" * 257}, {"call_id": "a\x00b"}, {"engine_id": "e\x00"}, {"parent_thread_id": "\x00"},
    {"tenant": "t" * 257},
])
def test_a_completion_out_of_the_tables_bounds_never_decodes(change) -> None:
    """The table builds a `Completion` only from a decoded `CallCompleted`: the wire's bounds are
    the table's (ids, finite non-negative durations, 32-bit counts), checked once, at decoding."""
    data = msgpack.packb({"schema_version": 1, "type": _GOOD.TYPE, "publisher_id": "p", "seq": 1,
                          "sent_at_ns": 1, "body": {**to_map(_GOOD), **change}}, use_bin_type=True)
    with pytest.raises(ProtocolError, match=next(iter(change))):
        decode(data)


def test_the_edges_decode_and_make_a_completion() -> None:
    edge = dataclasses.replace(_GOOD, call_id="c" * 256, service_s=0.0, prompt_tokens=2**31 - 1, submit_epoch=0,
                               parent_thread_id="", thread_service_at_submit_s=0.0, tenant="")
    done = completion_from_wire(decode(Publisher("p").encode(edge)).body)
    assert (done.call_id, done.prompt_tokens, done.tenant_id, done.engine_id) == ("c" * 256, 2**31 - 1,
                                                                                 DEFAULT_TENANT_ID, "e0")
