"""The Grafana dashboard reads only series the stack exports, and each service exports its own:
a real `autellix up` (lite engines), a few calls through the openai client, every process's
/metrics scraped (the targets `autellix up` wrote to metrics.json)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.bench.promql_names import dashboard_exprs, metric_names
from tests.observability.traffic import drive

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "autellix.json"


def _samples(text: str) -> dict[str, list]:
    """Sample name -> samples, as Prometheus stores them (histograms as _bucket, _sum, _count)."""
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


async def _scrape_all(targets: list[dict]) -> dict[str, dict[str, list]]:
    async with httpx.AsyncClient(timeout=5.0) as http:
        scraped = {}
        for target in targets:
            resp = await http.get(f"http://{target['targets'][0]}/metrics")
            assert resp.status_code == 200, (target, resp.status_code)
            scraped[target["labels"]["process"]] = _samples(resp.text)
        return scraped


def _value(samples: dict[str, list], name: str, **labels: str) -> float:
    return sum(s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items()))


@pytest.fixture(scope="module")
def scraped(up_stack) -> dict[str, dict[str, list]]:
    try:
        asyncio.run(drive(up_stack.base_url, up_stack.api_key))
    except Exception as exc:
        raise AssertionError(f"driving the shared stack failed: {exc!r}\n{up_stack.diagnose()}") from exc
    deadline = time.monotonic() + 10
    while True:  # the table closes the session and the engines' state tick follow the calls
        result = asyncio.run(_scrape_all(up_stack.targets))
        settled = _value(result["process_table"], "autellix_program_completion_seconds_count") >= 2 and all(
            _value(result[f"engine_agent-{e}"], "autellix_engine_queued_calls", level="0") == 0 for e in ("e0", "e1"))
        if settled or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def test_every_dashboard_query_names_a_series_the_stack_exports(scraped):
    dashboard = json.loads(DASHBOARD.read_text())
    exported = set().union(*(samples.keys() for samples in scraped.values()))
    exprs = dashboard_exprs(dashboard)
    assert len(exprs) >= 20
    missing = {}
    for title, expr in exprs:
        names = metric_names(expr)
        assert names, f"no series named in {title!r}: {expr}"
        if names - exported:
            missing[title] = sorted(names - exported)
    assert not missing, f"dashboard queries naming series nobody exports: {missing}"


def test_the_dashboard_has_the_five_sections():
    rows = {p["title"] for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] == "row"}
    assert {"Programs", "Tenants", "Engines", "Queues", "KV cache"} <= rows


def test_every_process_of_the_stack_is_a_target(up_stack, scraped):
    assert set(scraped) == set(up_stack.manifest["pids"])
    assert up_stack.manifest["metrics"]["router"].endswith("/metrics")


def test_engines_export_vllm_names_with_model_and_engine_labels(scraped):
    for engine_id in ("e0", "e1"):
        samples = scraped[f"engine_agent-{engine_id}"]
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                     "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds_count"):
            labels = [s.labels for s in samples[name]]
            assert labels and all(lb["engine"] == engine_id and lb["model_name"] == "autellix-lite"
                                  for lb in labels), (name, labels)
        assert _value(samples, "autellix_engine_queued_calls", level="0") == 0  # nothing waits after the calls
    completed = sum(_value(scraped[f"engine_agent-{e}"], "vllm:request_success_total") for e in ("e0", "e1"))
    ttft = sum(_value(scraped[f"engine_agent-{e}"], "vllm:time_to_first_token_seconds_count") for e in ("e0", "e1"))
    assert completed == ttft == 4  # three session calls and the streamed one


def test_the_api_counts_calls_refusals_and_session_ops_by_tenant_and_model(scraped):
    api = scraped["session_api"]
    assert _value(api, "autellix_api_calls_total", outcome="ok", tenant="dev", model_name="autellix-lite") == 4
    # the unknown model: refused before any token, counted, its name never a label value
    assert _value(api, "autellix_api_calls_total", outcome="error", tenant="dev", model_name="unknown") == 1
    assert not [s for s in api["autellix_api_calls_total"] if s.labels["model_name"] == "no-such-model"]
    assert _value(api, "autellix_api_session_ops_total", op="open", outcome="ok", tenant="dev") == 1
    assert _value(api, "autellix_api_session_ops_total", op="close", outcome="ok", tenant="dev") == 1


def test_programs_routing_and_promotions_are_counted(scraped):
    table = scraped["process_table"]
    assert _value(table, "autellix_program_completion_seconds_count", tenant="dev") == 2  # session + one-call
    assert _value(table, "autellix_program_calls_sum", tenant="dev") == 4
    assert _value(table, "autellix_programs_closed_total", reason="client") == 1
    router = scraped["router"]
    assert sum(s.value for s in router["autellix_router_decisions_total"]) == 4
    assert {s.labels["reason"] for s in router["autellix_router_decisions_total"]} <= {
        "round_robin", "locality", "least_loaded", "affinity", "new_session", "repinned", "stolen"}
    assert "autellix_controller_promotions_total" in scraped["controller"]
