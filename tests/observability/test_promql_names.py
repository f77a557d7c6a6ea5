"""The dashboard check's PromQL reader: names of series, never functions, labels or durations."""

from loadgen.bench.promql_names import metric_names


def test_names_of_an_aggregated_histogram_quantile():
    expr = 'histogram_quantile(0.99, sum by (le, engine) (rate(vllm:time_to_first_token_seconds_bucket{job="x"}[5m])))'
    assert metric_names(expr) == {"vllm:time_to_first_token_seconds_bucket"}


def test_names_on_both_sides_of_a_ratio_with_grafana_variables():
    expr = ("sum by (tenant) (rate(autellix_program_wait_seconds_total[$__rate_interval])) / "
            "(sum without (engine) (rate(a_total[1m])) + max(b_gauge{level=~\"0|1\"}) * 2)")
    assert metric_names(expr) == {"autellix_program_wait_seconds_total", "a_total", "b_gauge"}


def test_a_bare_series_and_an_aggregation_after_its_argument():
    assert metric_names("vllm:kv_cache_usage_perc") == {"vllm:kv_cache_usage_perc"}
    assert metric_names("sum(x) by (engine)") == {"x"}
