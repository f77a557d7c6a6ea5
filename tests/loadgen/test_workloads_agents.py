"""Issue 6 workloads with tool pauses: coding, browser, multitenant."""

from __future__ import annotations

import statistics

import pytest

from loadgen.workloads import make_programs, validate_program
from loadgen.workloads.coding import TOOLS
from loadgen.workloads.multitenant import tenant_class


@pytest.mark.parametrize("name", ["coding", "browser", "multitenant"])
def test_deterministic_valid_prefix_stable(name):
    programs = make_programs(name, 30, seed=4)
    assert programs == make_programs(name, 30, seed=4)
    assert make_programs(name, 60, seed=4)[:30] == programs
    for p in programs:
        validate_program(p)
    # pauses are on by default and can be switched off without changing anything else
    off = make_programs(name, 30, seed=4, tool_delays=False)
    assert all(c.delay_s == 0 for p in off for c in p.calls)
    assert [[c.prompt_segments for c in p.calls] for p in off] == [[c.prompt_segments for c in p.calls] for p in programs]


def test_coding_steps_context_and_tools():
    programs = make_programs("coding", 300, seed=1)
    steps = [len(p.calls) for p in programs]
    assert 37 * 0.85 < statistics.mean(steps) < 37 * 1.15 and max(steps) <= 150
    first = [p.calls[0].prompt_tokens for p in programs]
    assert 2000 < statistics.median(first) < 4500  # "a few K" at the start
    final = [p.calls[-1].prompt_tokens for p in programs]
    assert statistics.mean(final) > 16000 and max(final) > 50000  # tens of K later on
    for p in programs[:40]:
        tokens = [c.prompt_tokens for c in p.calls]
        assert tokens == sorted(tokens)  # the context only grows
        assert p.calls[0].tool is None and all(c.tool in TOOLS for c in p.calls[1:])
    pauses = {tool: sorted(c.delay_s for p in programs for c in p.calls if c.tool == tool) for tool in TOOLS}
    median = {tool: values[len(values) // 2] for tool, values in pauses.items()}
    assert 0.02 < median["read_file"] < 0.1 and 1.5 < median["run_test"] < 4.0
    all_pauses = sorted(v for values in pauses.values() for v in values)
    assert all_pauses[int(0.99 * len(all_pauses))] > 20 * all_pauses[len(all_pauses) // 2]  # heavy tail


def test_browser_steps_and_fresh_page_per_step():
    programs = make_programs("browser", 300, seed=1)
    assert 18 * 0.85 < statistics.mean(len(p.calls) for p in programs) < 18 * 1.15
    for p in programs[:40]:
        for prev, cur in zip(p.calls, p.calls[1:], strict=False):
            prev_page = prev.prompt_segments[-1]
            assert prev_page not in cur.prompt_segments  # the old page is dropped
            assert cur.prompt_segments[-2] == (f"out:{prev.call_id}", prev.output_tokens)
            assert cur.tool in {"click", "type", "scroll", "goto"}


def test_multitenant_tenants_and_shares():
    programs = make_programs("multitenant", 90, seed=2)
    by_class = {cls: [p for p in programs if p.tenant == cls] for cls in ("heavy", "medium", "light")}
    assert {cls: len(ps) for cls, ps in by_class.items()} == {"heavy": 30, "medium": 30, "light": 30}
    assert {p.workload for p in by_class["heavy"]} == {"coding"}
    assert {p.workload for p in by_class["medium"]} == {"browser"}
    assert {p.workload for p in by_class["light"]} == {"react"}
    heavy = statistics.mean(sum(c.prompt_tokens for c in p.calls) for p in by_class["heavy"])
    light = statistics.mean(sum(c.prompt_tokens for c in p.calls) for p in by_class["light"])
    assert heavy > 3 * light
    skewed = make_programs("multitenant", 60, seed=2, shares="1:0:5", tenants_per_class=3)
    assert sum(tenant_class(p.tenant) == "light" for p in skewed) == 50
    assert {tenant_class(p.tenant) for p in skewed} == {"heavy", "light"}
    assert len({p.tenant for p in skewed}) > 2
    for bad in ("1:1", "a:b:c", "0:0:0"):
        with pytest.raises(ValueError, match="shares"):
            make_programs("multitenant", 3, seed=1, shares=bad)
    with pytest.raises(ValueError, match="tenants_per_class"):
        make_programs("multitenant", 3, seed=1, tenants_per_class=0)
