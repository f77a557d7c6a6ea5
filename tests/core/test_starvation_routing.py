import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core.routing import RouterName, choose_engine, parse_router
from shared.core.starvation import StarvationConfig, should_promote

pos = st.floats(0, 1e4, allow_nan=False)


@given(pos, pos, st.floats(0.1, 20))
def test_a_waiting_program_is_promoted_once_its_wait_reaches_beta(service_s, extra_wait_s, beta):
    """With finite beta, wait is bounded: beyond beta * max(service, floor) the program is promoted."""
    cfg = StarvationConfig(beta=beta, min_service_s=1.0)
    bound_s = beta * max(service_s, 1.0) * (1 + 1e-9)  # float headroom
    assert should_promote(cfg, 0.0, service_s, bound_s + extra_wait_s, 0.0)


@given(pos, pos)
def test_no_beta_never_promotes(wait_s, service_s):
    assert not should_promote(StarvationConfig(beta=None), wait_s, service_s, 0.0, 0.0)


def test_bad_beta_is_rejected():
    with pytest.raises(ValueError):
        StarvationConfig(beta=0)


def test_locality_rule():
    loads = {"e0": 10.0, "e1": 1.0}
    assert choose_engine(RouterName.LOCALITY, loads, 4096, "e0", 0).engine_id == "e0"
    assert choose_engine(RouterName.LOCALITY, loads, 100, "e0", 0).engine_id == "e1"
    assert choose_engine(RouterName.LOCALITY, loads, 4096, "gone", 0).engine_id == "e1"
    assert [choose_engine(RouterName.ROUND_ROBIN, loads, 1, None, i).engine_id for i in range(3)] == ["e0", "e1", "e0"]


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), pos, min_size=1), st.integers(0, 10**5))
def test_least_loaded_picks_a_minimum(loads, prompt):
    decision = choose_engine(RouterName.LEAST_LOADED, loads, prompt, None, 0)
    assert loads[decision.engine_id] == min(loads.values())


def test_no_engine_and_bad_router_names_are_clear_errors():
    with pytest.raises(ValueError, match="no live engine"):
        choose_engine(RouterName.LOCALITY, {}, 1, None, 0)
    with pytest.raises(ValueError, match="locality, least-loaded, round-robin"):
        parse_router("random")


def test_plan_promotions_uses_worst_call_and_cooldown():
    from shared.core.starvation import ProgramTotals, WaitingCall, plan_promotions

    cfg = StarvationConfig(beta=3.0, min_service_s=1.0)
    waiting = [WaitingCall("a", 1.0, 0.0), WaitingCall("a", 40.0, 0.0), WaitingCall("b", 2.0, 0.0)]
    totals = {"a": ProgramTotals(0.0, 10.0), "b": ProgramTotals(0.0, 10.0)}
    decisions = plan_promotions(cfg, waiting, totals, now_s=100.0, last_promoted_s={}, cooldown_s=5.0)
    assert [d.program_id for d in decisions] == ["a"]
    assert plan_promotions(cfg, waiting, totals, 100.0, {"a": 97.0}, 5.0) == []
    assert plan_promotions(StarvationConfig(beta=None), waiting, totals, 100.0, {}, 5.0) == []
