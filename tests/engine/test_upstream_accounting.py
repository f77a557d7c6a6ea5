"""The upstream backend's pure arithmetic: priority from program service, vLLM's /metrics read,
and a call's service estimated from what the agent observes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.program import ProgramLedger
from shared.engine.upstream_accounting import (
    TENANT_PRIORITY_SPAN,
    PhaseMeans,
    UpstreamMetrics,
    call_priority,
    estimate_service,
    parse_metrics,
    tenant_first_priority,
    window_means,
)

METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_waiting{engine="0",model_name="tiny"} 5.0
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:request_prefill_time_seconds_bucket{engine="0",le="0.3",model_name="tiny"} 7.0
vllm:request_prefill_time_seconds_count{engine="0",model_name="tiny"} 10.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="tiny"} 0.5
vllm:request_queue_time_seconds_count{engine="0",model_name="tiny"} 10.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="tiny"} 2.0
vllm:request_decode_time_seconds_sum{engine="0",model_name="tiny"} 3.0
vllm:request_generation_tokens_sum{engine="0",model_name="tiny"} 300.0
vllm:generation_tokens_total{engine="0",model_name="tiny"} 999.0
vllm:num_requests_running 1
python_gc_objects_collected_total{generation="0"} 123.0
"""


def test_metrics_are_read_and_summed_over_label_sets():
    got = parse_metrics(METRICS)
    assert (got.running, got.waiting, got.kv_use) == (4, 5, 0.25)
    assert (got.prefill_sum, got.prefill_count, got.queue_sum, got.queue_count) == (0.5, 10.0, 2.0, 10.0)
    assert (got.decode_sum, got.generation_tokens) == (3.0, 300.0)


def test_unreadable_lines_are_skipped():
    assert parse_metrics("vllm:num_requests_running{x=\"1\"} nan-ish\nvllm:num_requests_waiting\n") == \
        UpstreamMetrics()


def test_window_means_are_of_the_requests_finished_in_the_window():
    before = UpstreamMetrics(prefill_sum=1.0, prefill_count=10, queue_sum=4.0, queue_count=10,
                             decode_sum=1.0, generation_tokens=100)
    after = UpstreamMetrics(prefill_sum=1.5, prefill_count=12, queue_sum=4.0, queue_count=10,
                            decode_sum=3.0, generation_tokens=300)
    means = window_means(before, after, PhaseMeans(prefill_s=9.0, queue_s=0.7))
    assert means.prefill_s == 0.25 and means.decode_s_per_token == 0.01
    assert means.queue_s == 0.7  # nothing finished: the last mean stays


def test_a_restarted_upstream_keeps_the_last_means():
    before = UpstreamMetrics(prefill_sum=5.0, prefill_count=50)
    after = UpstreamMetrics(prefill_sum=0.1, prefill_count=1)
    assert window_means(before, after, PhaseMeans(0.2, 0.3, 0.01)) == PhaseMeans(0.2, 0.3, 0.01)


def test_service_is_prefill_plus_decode_per_token_and_the_rest_is_wait():
    means = PhaseMeans(prefill_s=0.1, queue_s=9.0, decode_s_per_token=0.01)
    est = estimate_service(e2e_s=5.0, output_tokens=200, means=means)
    assert round(est.service_s, 9) == 2.1 and round(est.wait_s, 9) == 2.9


def test_service_never_exceeds_the_time_the_call_took():
    est = estimate_service(e2e_s=1.0, output_tokens=500, means=PhaseMeans(0.1, 0.0, 0.01))
    assert (est.service_s, est.wait_s) == (1.0, 0.0)


def test_before_any_decode_time_is_known_a_call_waits_the_mean_queue_time():
    est = estimate_service(e2e_s=2.0, output_tokens=100, means=PhaseMeans(prefill_s=0.1, queue_s=0.5))
    assert (est.wait_s, est.service_s) == (0.5, 1.5)


def test_a_call_without_usage_waits_the_mean_queue_time():
    est = estimate_service(e2e_s=2.0, output_tokens=None, means=PhaseMeans(prefill_s=0.1, queue_s=0.3))
    assert (round(est.wait_s, 9), est.service_s) == (0.3, 1.7)


@given(e2e=st.floats(0, 1e4), tokens=st.none() | st.integers(-5, 10**6), prefill=st.floats(0, 1e3),
       queue=st.floats(0, 1e3), per_token=st.floats(0, 1.0))
def test_service_and_wait_are_never_negative_and_add_up(e2e, tokens, prefill, queue, per_token):
    est = estimate_service(e2e, tokens, PhaseMeans(prefill, queue, per_token))
    assert est.service_s >= 0 and est.wait_s >= 0
    assert abs(est.service_s + est.wait_s - e2e) <= 1e-9 * max(1.0, e2e)


def test_priority_is_the_program_level_and_fcfs_sends_none():
    heavy = ProgramLedger(program_id="p")
    heavy.thread_service_s["main"] = 50.0
    heavy.service_s = 50.0
    light = ProgramLedger(program_id="q")
    atlas = SchedulingPolicy(PolicyName.ATLAS)
    assert call_priority(atlas, light, "main") == 0
    assert call_priority(atlas, heavy, "main") == atlas.mlfq.level_for(50.0) > 0
    assert call_priority(SchedulingPolicy(PolicyName.FCFS), heavy, "main") == 0


@given(service=st.floats(0, 1e5), more=st.floats(0, 1e5))
def test_more_attained_service_never_means_a_better_priority(service, more):
    policy = SchedulingPolicy(PolicyName.PLAS)
    a = ProgramLedger(program_id="a")
    b = ProgramLedger(program_id="b")
    a.service_s, b.service_s = service, service + more
    assert call_priority(policy, a, "main") <= call_priority(policy, b, "main")


@given(st.floats(min_value=0, max_value=1e5), st.floats(min_value=0, max_value=1e5))
def test_serpt_sends_less_expected_work_as_a_lower_priority(a, b):
    serpt = SchedulingPolicy(PolicyName.SERPT)
    ledger = ProgramLedger("p")
    pa, pb = call_priority(serpt, ledger, "main", a), call_priority(serpt, ledger, "main", b)
    if round(1000 * a) < round(1000 * b):
        assert pa < pb
    # without an estimate: what the program has had (least attained first)
    ledger.service_s = a
    assert call_priority(serpt, ledger, "main", None) == round(1000 * a)


@given(st.integers(0, TENANT_PRIORITY_SPAN - 1), st.integers(0, TENANT_PRIORITY_SPAN - 1))
def test_an_over_share_tenants_upstream_priority_is_behind_every_other_tenants(behind, ahead):
    """Whatever the policy's priority (a level, or SERPT's milliseconds), the tenant class comes first."""
    assert tenant_first_priority(1, behind) > tenant_first_priority(0, ahead)
    assert tenant_first_priority(0, ahead) == ahead
