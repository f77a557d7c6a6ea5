"""The engine agent's operations through the method vllm_adapter adds to vLLM's EngineCore, on
vLLM's real scheduler (the table itself: tests/engine/test_scheduler_ops.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.vllm.needs_vllm import import_adapter, import_cpu

adapter = import_adapter()
va = import_cpu()
from vllm.v1.engine.core import EngineCore  # noqa: E402

from shared.engine.program_directory import CachedProgramDirectory  # noqa: E402

pytestmark = pytest.mark.vllm


def _call(sched, op, *args):
    """What the engine core process runs for `call_utility_async(SCHEDULER_CALL, op, *args)`."""
    return getattr(EngineCore, adapter.SCHEDULER_CALL)(SimpleNamespace(scheduler=sched), op, *args)


@pytest.mark.parametrize("kind", ["autellix", "stock-fcfs"])
def test_serve_apply_drain_on_vllms_scheduler(kind):
    # as the vllm backend builds it: promotions come from the table, none engine-local (beta None)
    sched = va.build_cpu_scheduler(num_blocks=200, max_model_len=4096, kind=kind, settings={"beta": None})
    assert _call(sched, "serve") is None
    assert isinstance(sched.program_state.directory, CachedProgramDirectory)
    assert _call(sched, "apply", [("update", "p", 5.0, 1.0, {"main": 5.0}, 0, 3),
                                  ("update", "p", 0.0, 0.0, {}, 1, 3),  # the table promoted it
                                  ("tenants", {"t1": 1})]) == 3
    assert sched.program_state.directory.get("p").epoch == 1
    sched.add_request(va.make_request("r0", list(range(32)), 2, 0.0,
                                      {"autellix": {"program_id": "p", "call_id": "c0"}}))
    drained = _call(sched, "drain")
    assert (drained["running"], drained["waiting"], drained["finished"]) == (0, 1, [])
    t = 0.0
    while sched.has_unfinished_requests():
        sched.set_clock(t, 0.01)
        so = sched.schedule()
        sched.update_from_output(so, va.fake_runner_output(sched, so, lambda rid, i: 1000 + i))
        t += 0.01
    [record] = _call(sched, "drain")["finished"]
    assert record["call_id"] == "c0" and record["program_id"] == "p" and record["output_tokens"] == 2


def test_unknown_op_and_apply_kind_are_refused():
    sched = va.build_cpu_scheduler(num_blocks=200, max_model_len=4096, settings={"beta": None})
    with pytest.raises(ValueError, match="unknown scheduler operation 'bogus'; valid: serve, apply, drain"):
        _call(sched, "bogus")
    _call(sched, "serve")
    with pytest.raises(ValueError, match="unknown apply kind 'rename'"):
        _call(sched, "apply", [("rename", "p")])
    with pytest.raises(ValueError, match="unknown apply kind 'promote'"):  # the table's update carries it
        _call(sched, "apply", [("promote", "p", 1)])


def test_serving_refuses_engine_local_promotion():
    """A served engine's directory is the table's read-only view: a beta would promote in it."""
    sched = va.build_cpu_scheduler(num_blocks=200, max_model_len=4096, settings={"beta": 5.0})
    with pytest.raises(ValueError, match="takes promotions from the process table"):
        _call(sched, "serve")
