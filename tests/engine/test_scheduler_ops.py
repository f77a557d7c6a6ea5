"""The engine agent's operations on the in-engine scheduler: one explicit table, refused names.
(vLLM-free: `vllm_ops` reads the scheduler's attributes only; tests/vllm/test_scheduler_ops.py
runs the table on vLLM's real scheduler.)"""

from __future__ import annotations

import inspect

import pytest

from shared.engine import vllm_ops
from shared.engine.vllm_ops import HANDLERS, SchedulerOp, SchedulerOpsMixin, dispatch, scheduler_op


def test_every_op_has_exactly_one_handler_of_its_own():
    assert set(HANDLERS) == set(SchedulerOp)
    assert len(set(HANDLERS.values())) == len(SchedulerOp)
    for op, handler in HANDLERS.items():
        assert handler is getattr(SchedulerOpsMixin, handler.__name__), op  # a method of the mixin
        assert handler.__name__ == f"autellix_{op.value}", "the handler's name follows its op"


def test_the_table_is_read_only():
    with pytest.raises(TypeError):
        HANDLERS[SchedulerOp.DRAIN] = lambda s: None  # type: ignore[index]


def test_every_handler_method_is_in_the_table():
    """A handler written on the mixin but left out of the table would be dead: none is."""
    methods = {f for name, f in inspect.getmembers(SchedulerOpsMixin, inspect.isfunction)
               if name.startswith("autellix_")}
    assert methods == set(HANDLERS.values())


@pytest.mark.parametrize("op", ["bogus", "", "Drain", "autellix_drain", "__init__"])
def test_an_unknown_op_is_refused_by_name(op):
    with pytest.raises(ValueError, match=r"unknown scheduler operation .*; valid: serve, apply, drain"):
        scheduler_op(op)
    with pytest.raises(ValueError, match="unknown scheduler operation"):
        dispatch(object(), op)


def test_a_scheduler_without_the_handlers_is_refused():
    with pytest.raises(ValueError, match="scheduler object takes no Autellix operations"):
        dispatch(object(), "drain")


def test_ops_travel_as_plain_strings():
    """vLLM's utility call carries the op in msgpack: the enum's members are its strings."""
    assert [o.value for o in SchedulerOp] == ["serve", "apply", "drain"]
    assert all(isinstance(o, str) and o == o.value for o in SchedulerOp)
    assert scheduler_op("apply") is SchedulerOp.APPLY
    assert vllm_ops.APPLY_KINDS == ("update", "close", "tenants")
