"""Bad input at admission, requests without program metadata, and the async scheduler class."""

from __future__ import annotations

import pytest

from tests.vllm.needs_vllm import import_adapter, import_cpu

adapter = import_adapter()
va = import_cpu()
pytestmark = pytest.mark.vllm


def _drain(sched, max_steps: int = 1000) -> None:
    t = 0.0
    for _ in range(max_steps):
        if not sched.has_unfinished_requests():
            return
        sched.set_clock(t, 0.01)
        so = sched.schedule()
        sched.update_from_output(so, va.fake_runner_output(sched, so, lambda rid, i: 1000 + i))
        t += 0.01
    raise AssertionError("requests did not finish")


@pytest.mark.parametrize("extra_args, message", [
    ({"autellix": {"program_id": 5}}, "program_id"),
    ({"autellix": {"thread_id": "t"}}, "lacks 'program_id'"),
    ({"autellix": {"program_id": "p", "bogus": 1}}, "unknown fields ['bogus']"),
    ({"autellix": "p1"}, "must be a mapping"),
    ({"autellix_program_id": "p", "autellix": {"program_id": "p"}}, "not both"),
    ({"autellix_program_id": "p", "autellix_seq": -2}, "seq"),
    ({"autellix": {"program_id": "p", "program_arrival_s": -1}}, "program_arrival_s"),
    ({"autellix": {"program_id": "p", "seq": "x"}}, "seq"),
])
def test_bad_extra_args_rejected_at_admission(extra_args, message):
    sched = va.build_cpu_scheduler(num_blocks=200, max_model_len=4096)
    with pytest.raises(ValueError, match="request bad") as info:
        sched.add_request(va.make_request("bad", list(range(32)), 4, 0.0, extra_args))
    assert message in str(info.value)
    assert not sched.requests and not sched.program_state.calls and not sched.waiting
    # the engine loop carries on: a good request still runs to completion
    sched.add_request(va.make_request("good", list(range(32)), 4, 0.0, {"autellix": {"program_id": "p"}}))
    _drain(sched)
    [done] = sched.pop_finished_calls()
    assert done.call_id == "good" and done.output_tokens == 4


def test_request_without_metadata_is_a_one_call_program():
    sched = va.build_cpu_scheduler(num_blocks=200, max_model_len=4096)
    sched.add_request(va.make_request("solo", list(range(40)), 3, 0.0))
    assert sched.program_state.calls["solo"].program_id == "solo"
    _drain(sched)
    [done] = sched.pop_finished_calls()
    assert (done.program_id, done.output_tokens, done.service_s) == ("solo", 3, pytest.approx(0.03))


def test_unknown_scheduler_settings_rejected():
    with pytest.raises(ValueError, match="unknown autellix scheduler settings"):
        va.build_cpu_scheduler(num_blocks=50, max_model_len=4096, settings={"polcy": "plas"})
    with pytest.raises(ValueError, match="unknown policy"):
        va.build_cpu_scheduler(num_blocks=50, max_model_len=4096, settings={"policy": "lifo"})


def test_async_scheduler_class_runs_and_preempts():
    """The production class (AsyncScheduler subclass) driven the way EngineCore's batch queue
    drives it: schedule step N+1 before step N's output is processed."""
    sched = va.build_cpu_scheduler(num_blocks=400, max_num_seqs=1, max_model_len=4096, sync=False,
                                   settings={"policy": "plas"})
    assert isinstance(sched, adapter.ProgramAwareScheduler)
    sched.program_state.directory.ledger("A").service_s = 10.0
    sched.add_request(va.make_request("a0", list(range(100)), 50, 0.0, {"autellix": {"program_id": "A"}}))
    in_flight = []
    t = 0.0
    preempted = set()
    for i in range(400):
        if i == 5:
            sched.add_request(va.make_request("b0", list(range(500, 600)), 5, t, {"autellix": {"program_id": "B"}}))
        if not sched.has_unfinished_requests() and not in_flight:
            break
        sched.set_clock(t, 0.01)
        so = sched.schedule()
        preempted |= so.preempted_req_ids
        in_flight.append(so)
        if len(in_flight) == 2 or not so.num_scheduled_tokens:
            done = in_flight.pop(0)
            sched.update_from_output(done, va.fake_runner_output(sched, done, lambda rid, k: 1000 + k))
        t += 0.01
    while in_flight:
        done = in_flight.pop(0)
        sched.update_from_output(done, va.fake_runner_output(sched, done, lambda rid, k: 1000 + k))
    finished = {c.call_id: c for c in sched.pop_finished_calls()}
    assert preempted == {"a0"}
    assert set(finished) == {"a0", "b0"} and finished["b0"].finish_s < finished["a0"].finish_s
    assert (finished["a0"].output_tokens, finished["b0"].output_tokens) == (50, 5)
