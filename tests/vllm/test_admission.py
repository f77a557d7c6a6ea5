"""Bad input at admission, requests without program metadata, and the async scheduler class."""

from __future__ import annotations

import pytest

from tests.vllm.needs_vllm import import_adapter, import_cpu

adapter = import_adapter()
va = import_cpu()
from vllm.v1.engine import FinishReason  # noqa: E402

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
def test_bad_extra_args_fail_only_that_request(extra_args, message, caplog):
    """A malformed value under our key fails that request (FINISHED_ERROR, as vLLM fails one whose
    grammar does not compile) with a log line naming the field; the engine process carries on."""
    sched = va.build_cpu_scheduler(num_blocks=200, max_model_len=4096)
    sched.add_request(va.make_request("bad", list(range(32)), 4, 0.0, extra_args))
    sched.add_request(va.make_request("good", list(range(32)), 4, 0.0, {"autellix": {"program_id": "p"}}))
    assert message in caplog.text and "request bad" in caplog.text
    sched.set_clock(0.0, 0.01)
    so = sched.schedule()
    assert "bad" not in so.num_scheduled_tokens  # never scheduled
    outs = sched.update_from_output(so, va.fake_runner_output(sched, so, lambda rid, i: 1000 + i))
    [err] = [o for eco in outs.values() for o in eco.outputs if o.request_id == "bad"]
    assert err.finish_reason == FinishReason.ERROR and "bad" not in sched.requests
    _drain(sched)
    done = {c.call_id: c for c in sched.pop_finished_calls()}
    assert done["good"].output_tokens == 4 and done["bad"].finish_reason == "error"
    assert not sched.program_state.calls


def test_foreign_extra_args_keys_are_left_alone():
    """Keys that are not ours belong to vLLM or other plug-ins: never read, never refused."""
    foreign = {"kv_transfer_params": {"do_remote_prefill": False}, "session_id": "s1", "my_plugin": [1, 2],
               "autellixfoo": 3, 7: "x"}
    sched = va.build_cpu_scheduler(num_blocks=200, max_model_len=4096)
    sched.add_request(va.make_request("r0", list(range(32)), 2, 0.0, dict(foreign)))
    sched.add_request(va.make_request("r1", list(range(32, 64)), 2, 0.0,
                                      {**foreign, "autellix": {"program_id": "P", "thread_id": "t"}}))
    assert sched.program_state.calls["r0"].program_id == "r0"
    assert (sched.program_state.calls["r1"].program_id, sched.program_state.calls["r1"].thread_id) == ("P", "t")
    assert sched.requests["r1"].sampling_params.extra_args["my_plugin"] == [1, 2]
    _drain(sched)
    assert sorted(c.call_id for c in sched.pop_finished_calls()) == ["r0", "r1"]


def test_client_priority_stays_the_outer_key():
    """vLLM's own priority orders classes of service; our level orders calls inside a class, and
    the client's number is never rewritten."""
    sched = va.build_cpu_scheduler(num_blocks=400, max_num_seqs=1, max_model_len=4096, settings={"policy": "plas"})
    sched.program_state.directory.ledger("Heavy").service_s = 100.0  # a low level
    reqs = [("light-p1", "Light", 1), ("heavy-p0", "Heavy", 0), ("light-p0", "Light2", 0)]
    for rid, prog, prio in reqs:
        sched.add_request(va.make_request(rid, list(range(hash(rid) % 500, hash(rid) % 500 + 32)), 2, 0.0,
                                          {"autellix": {"program_id": prog}}, priority=prio))
    assert [sched.requests[r].priority for r, _, _ in reqs] == [1, 0, 0]
    # priority 0 first (level 0 before the heavy program's level), priority 1 last
    assert [r.request_id for r in sched.waiting] == ["light-p0", "heavy-p0", "light-p1"]


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


@pytest.mark.parametrize("kv_delivery, blocks_freeable", [(False, True), (True, True), (True, False)])
def test_proactive_preemption_is_vllms_own(kv_delivery, blocks_freeable):
    """`_preempt_call` does what vLLM's schedule() does on KV exhaustion: it drops (not delivers)
    a victim's in-flight output when a KV connector must deliver its blocks, and leaves alone a
    runner whose blocks a deferred free still holds."""
    sched = va.build_cpu_scheduler(num_blocks=400, max_num_seqs=1, max_model_len=4096, settings={"policy": "plas"})
    sched.program_state.directory.ledger("A").service_s = 10.0  # level 4: a fresh program outranks it
    sched.requires_kv_delivery = kv_delivery
    if not blocks_freeable:
        sched._request_blocks_can_be_freed = lambda request: False
    sched.add_request(va.make_request("a0", list(range(64)), 50, 0.0, {"autellix": {"program_id": "A"}}))
    t = 0.0
    for _ in range(3):
        sched.set_clock(t, 0.01)
        so = sched.schedule()
        sched.update_from_output(so, va.fake_runner_output(sched, so, lambda rid, i: 1000 + i))
        t += 0.01
    sched.add_request(va.make_request("b0", list(range(500, 532)), 4, t, {"autellix": {"program_id": "B"}}))
    sched.set_clock(t, 0.01)
    so = sched.schedule()
    a0 = sched.requests["a0"]
    if blocks_freeable:
        assert so.preempted_req_ids == {"a0"} and "b0" in so.num_scheduled_tokens
        assert a0.num_preemptions == 1 and a0.drop_stale_output is kv_delivery
    else:
        assert not so.preempted_req_ids and a0.num_preemptions == 0 and "a0" in so.num_scheduled_tokens
