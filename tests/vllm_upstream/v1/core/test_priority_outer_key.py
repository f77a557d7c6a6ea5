# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
# Adapted from vLLM v0.32.0 tests/v1/core/test_scheduler.py (test_priority_scheduling_*) for
# Autellix's outer-key rule; see tests/vllm_upstream/README.md.
"""vLLM's priority tests with programs: the client's `priority` stays the outer key (classes of
service, never rewritten) and the program's MLFQ level orders calls inside a class."""

import pytest

from tests.vllm_upstream.under_test import adapter
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.request import Request

from .test_scheduler import create_scheduler_with_priority

pytestmark = pytest.mark.skipif(not issubclass(create_scheduler_with_priority().__class__,
                                               adapter.SyncProgramAwareScheduler),
                                reason="AUTELLIX_UPSTREAM_SCHEDULER=stock: vLLM's class has no program levels")


def _requests(specs):
    """(request id, priority, arrival, program): one request each, 10 prompt tokens."""
    init_none_hash(sha256)
    hasher = get_request_block_hasher(16, sha256)
    out = []
    for i, (rid, prio, arrival, program) in enumerate(specs):
        sp = SamplingParams(max_tokens=16, extra_args={"autellix": {"program_id": program}})
        out.append(Request(request_id=rid, prompt_token_ids=[i] * 10, sampling_params=sp, pooling_params=None,
                           priority=prio, arrival_time=arrival, block_hasher=hasher))
    return out


def _with_heavy_program(scheduler, program="heavy", service_s=100.0):
    scheduler.program_state.directory.ledger(program).service_s = service_s  # the lowest level
    return scheduler


def test_priority_classes_then_levels_then_arrival():
    """As test_priority_scheduling_mixed_priority_and_arrival, with one heavy program: inside
    priority 1 the light program's later call goes first; priority 0 still beats both."""
    scheduler = _with_heavy_program(create_scheduler_with_priority())
    requests = _requests([("0", 2, 1.0, "light"), ("1", 1, 2.0, "heavy"), ("2", 1, 3.0, "light2"),
                          ("3", 0, 4.0, "heavy")])
    for request in requests:
        scheduler.add_request(request)
    output = scheduler.schedule()
    assert [r.req_id for r in output.scheduled_new_reqs] == ["3", "2", "1", "0"]
    assert [r.priority for r in requests] == [2, 1, 1, 0]  # the client's numbers, untouched


def test_limited_slots_fill_by_class_then_level():
    """As test_priority_scheduling_with_limited_slots: two slots, the waiting queue in
    (priority, level, arrival) order."""
    scheduler = _with_heavy_program(create_scheduler_with_priority(max_num_seqs=2, max_num_batched_tokens=1000))
    for request in _requests([("0", 1, 1.0, "heavy"), ("1", 1, 2.0, "a"), ("2", 2, 3.0, "b"), ("3", 1, 4.0, "c")]):
        scheduler.add_request(request)
    output = scheduler.schedule()
    assert sorted(r.req_id for r in output.scheduled_new_reqs) == ["1", "3"]
    assert [r.request_id for r in scheduler.waiting] == ["0", "2"]


def test_better_level_displaces_worse_only_inside_its_class():
    """Full batch: a fresh program's call displaces a heavy program's runner of the same priority,
    never a runner of a better priority class."""
    scheduler = _with_heavy_program(create_scheduler_with_priority(max_num_seqs=2, max_num_batched_tokens=1000))
    for request in _requests([("vip-heavy", 0, 1.0, "heavy"), ("std-heavy", 1, 2.0, "heavy")]):
        scheduler.add_request(request)
    assert len(scheduler.schedule().scheduled_new_reqs) == 2
    [fresh] = _requests([("std-fresh", 1, 3.0, "fresh")])
    scheduler.add_request(fresh)
    for _ in range(scheduler.autellix_settings.preemption_interval_steps):
        output = scheduler.schedule()
        if output.preempted_req_ids:
            break
    assert output.preempted_req_ids == {"std-heavy"}  # same class, worse level
    assert "std-fresh" in [r.req_id for r in output.scheduled_new_reqs]
    assert {r.request_id for r in scheduler.running} == {"vip-heavy", "std-fresh"}
