"""The scaling prediction (loadgen/bench/scaling_model.py): cores bound, one-process bound."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loadgen.bench.scaling_model import predict

COSTS = {"session_api": 0.5, "router": 0.2, "engine_agent": 0.3, "nats": 0.1, "client": 0.4, "total": 1.5}


def test_two_cores_are_bound_by_the_sum_and_many_by_the_busiest_process():
    assert predict(COSTS, {"session_api": 1}, 2) == {"calls_per_s": 1818.2, "bound_by": "cores"}  # 2 / 1.1 ms
    assert predict(COSTS, {"session_api": 1}, 64) == {"calls_per_s": 2000.0, "bound_by": "session_api"}
    assert predict(COSTS, {"session_api": 4}, 64) == {"calls_per_s": 3333.3, "bound_by": "engine_agent"}


def test_nothing_measured_predicts_nothing():
    assert predict({"client": 1.0}, {}, 4) == {"calls_per_s": None, "bound_by": None}


@given(st.dictionaries(st.sampled_from(["session_api", "router", "engine_agent", "nats", "postgres"]),
                       st.floats(0.001, 10.0), min_size=1), st.integers(1, 256), st.integers(1, 8))
def test_more_cores_or_workers_never_predict_less(costs, cores, workers):
    base = predict(costs, {"session_api": workers}, cores)["calls_per_s"]
    assert predict(costs, {"session_api": workers}, cores + 1)["calls_per_s"] >= base
    assert predict(costs, {"session_api": workers + 1}, cores)["calls_per_s"] >= base
    assert base <= cores / (sum(costs.values()) / 1e3) + 0.1
