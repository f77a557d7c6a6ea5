"""The router's decision wrapper over the pure core: locality for long prompts, least-loaded
otherwise, round-robin as an option, engines joining and leaving by heartbeat."""

from __future__ import annotations

import pytest

from services.router.decision import EngineChooser, NoEngineError, RouteRequest
from services.router.engine_table import EngineState, EngineTable
from shared.core.routing import RouterName


def _table(loads: dict[str, float], now_s: float = 0.0, ttl_s: float = 3.0) -> EngineTable:
    table = EngineTable(ttl_s)
    for engine_id, load in loads.items():
        table.observe(EngineState(engine_id, load, 0, 0, 0, 100, now_s))
    return table


def test_long_prompt_goes_to_primary_engine_even_when_busier():
    chooser = EngineChooser(_table({"e0": 10_000.0, "e1": 0.0}), RouterName.LOCALITY, 2048)
    decision = chooser.choose(RouteRequest("p", 4096, 10, primary_engine="e0"), now_s=1.0)
    assert decision.engine_id == "e0" and decision.reason.startswith("locality")


def test_short_prompt_goes_to_least_loaded():
    chooser = EngineChooser(_table({"e0": 10_000.0, "e1": 5.0}), RouterName.LOCALITY, 2048)
    assert chooser.choose(RouteRequest("p", 100, 10, primary_engine="e0"), 1.0).engine_id == "e1"


def test_threshold_is_inclusive_and_a_setting():
    chooser = EngineChooser(_table({"e0": 100.0, "e1": 0.0}), RouterName.LOCALITY, 500)
    assert chooser.choose(RouteRequest("p", 500, 1, "e0"), 1.0).engine_id == "e0"
    assert chooser.choose(RouteRequest("q", 499, 1, "e0"), 1.0).engine_id == "e1"


def test_first_engine_becomes_primary_without_a_hint():
    chooser = EngineChooser(_table({"e0": 0.0, "e1": 50.0}), RouterName.LOCALITY, 2048)
    assert chooser.choose(RouteRequest("p", 10, 1, None), 1.0).engine_id == "e0"
    assert chooser.primary_engine("p") == "e0"
    # e0 is now loaded by that call; a long prompt of p still goes home
    chooser.table.add_load("e0", 1e6)
    assert chooser.choose(RouteRequest("p", 3000, 1, None), 1.0).engine_id == "e0"


def test_routed_work_counts_before_the_next_heartbeat():
    chooser = EngineChooser(_table({"e0": 0.0, "e1": 0.0}), RouterName.LEAST_LOADED, 2048)
    picks = [chooser.choose(RouteRequest(f"p{i}", 100, 100, None), 1.0).engine_id for i in range(4)]
    assert picks == ["e0", "e1", "e0", "e1"]


def test_round_robin_cycles_over_live_engines():
    chooser = EngineChooser(_table({"e0": 0.0, "e1": 0.0, "e2": 0.0}), RouterName.ROUND_ROBIN, 2048)
    picks = [chooser.choose(RouteRequest("p", 5000, 1, "e2"), 1.0).engine_id for _ in range(4)]
    assert picks == ["e0", "e1", "e2", "e0"]


def test_engines_leave_after_silence_and_the_primary_is_replaced():
    table = _table({"e0": 0.0, "e1": 0.0}, now_s=0.0, ttl_s=1.0)
    chooser = EngineChooser(table, RouterName.LOCALITY, 2048)
    table.observe(EngineState("e1", 0.0, 0, 0, 0, 100, 2.0))  # only e1 kept beating
    assert table.expire(2.5) == ["e0"]
    decision = chooser.choose(RouteRequest("p", 4096, 1, primary_engine="e0"), 2.5)
    assert decision.engine_id == "e1"
    assert chooser.primary_engine("p") == "e1"


def test_no_live_engine_is_a_retryable_error():
    chooser = EngineChooser(EngineTable(1.0), RouterName.LOCALITY, 2048)
    with pytest.raises(NoEngineError, match="retry"):
        chooser.choose(RouteRequest("p", 1, 1, None), 0.0)


def test_engine_table_rejects_bad_ttl():
    with pytest.raises(ValueError):
        EngineTable(0)
