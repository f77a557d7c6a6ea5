"""Workload generators: determinism, paper figures, DAG validity, bad input."""

from __future__ import annotations

import statistics

import pytest

from loadgen.workloads import WORKLOADS, make_programs, poisson_arrivals, validate_program, with_arrivals
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.stats import new_prompt_tokens as _new_tokens

PAPER_WORKLOADS = ["chatbot", "react", "mapreduce", "mcts", "mixed"]


def _calls(programs: list[ProgramSpec]) -> list:
    return [c for p in programs for c in p.calls]


@pytest.mark.parametrize("name", PAPER_WORKLOADS)
def test_same_seed_same_programs_and_prefix_stable(name):
    a = make_programs(name, 24, seed=3)
    assert a == make_programs(name, 24, seed=3)
    assert a != make_programs(name, 24, seed=4)
    # doubling the run keeps the first half identical (simulator's doubling check relies on it)
    assert make_programs(name, 48, seed=3)[:24] == a


@pytest.mark.parametrize("name", PAPER_WORKLOADS)
def test_programs_are_valid_dags(name):
    for program in make_programs(name, 60, seed=11):
        validate_program(program)
        assert program.arrival_s == 0.0


def test_chatbot_near_paper():
    programs = make_programs("chatbot", 600, seed=1)
    calls = [len(p.calls) for p in programs]
    assert 6.66 * 0.75 < statistics.mean(calls) < 6.66 * 1.25
    assert max(calls) > 20  # Pareto tail
    outputs = [c.output_tokens for c in _calls(programs)]
    assert 339 * 0.85 < statistics.mean(outputs) < 339 * 1.15
    for p in programs[:50]:  # history grows: each call's prompt extends the previous call's
        for prev, cur in zip(p.calls, p.calls[1:], strict=False):
            assert cur.prompt_segments[: len(prev.prompt_segments)] == prev.prompt_segments
            assert f"out:{prev.call_id}" in {s for s, _ in cur.prompt_segments}
            assert cur.depends_on == (prev.call_id,)


def test_react_near_paper_with_shared_tool_schemas():
    programs = make_programs("react", 600, seed=1)
    assert 10.75 * 0.85 < statistics.mean(len(p.calls) for p in programs) < 10.75 * 1.15
    calls = _calls(programs)
    assert 34 * 0.9 < statistics.mean(c.output_tokens for c in calls) < 34 * 1.1
    new = [n for p in programs for n in _new_tokens(p)]
    first = [p.calls[0] for p in programs]
    # the 5K schemas are one segment shared by every program; the rest of the first prompt is new
    assert {c.prompt_segments[0] for c in first} == {("react:tool-schemas", 5000)}
    assert 735 * 0.85 < statistics.mean(new) < 735 * 1.15
    assert statistics.mean(c.prompt_tokens for c in calls) > 5000 + statistics.mean(new)


def test_mcts_near_paper_and_tree_shape():
    programs = make_programs("mcts", 200, seed=1)
    assert 159.7 * 0.9 < statistics.mean(len(p.calls) for p in programs) < 159.7 * 1.1
    calls = _calls(programs)
    assert 73 * 0.9 < statistics.mean(c.output_tokens for c in calls) < 73 * 1.1
    new = [n for p in programs for n in _new_tokens(p)]
    assert 467 * 0.85 < statistics.mean(new) < 467 * 1.15
    for p in programs[:20]:
        assert (len(p.calls) - 1) % 5 == 0
        by_id = {c.call_id: c for c in p.calls}
        for call in p.calls[1:]:
            parent = by_id[call.depends_on[0]]  # tree edge first
            assert call.parent_thread_id == parent.thread_id != call.thread_id
            # a child's context is its parent's whole trajectory
            assert call.prompt_segments[: len(parent.prompt_segments)] == parent.prompt_segments
        assert p.num_threads == len(p.calls)  # root + one thread per expanded child


def test_mapreduce_fork_join():
    for p in make_programs("mapreduce", 50, seed=2):
        *maps, reduce = p.calls
        assert 4 <= len(maps) <= 16
        assert all(m.parent_thread_id == "main" and not m.depends_on for m in maps)
        assert set(reduce.depends_on) == {m.call_id for m in maps}
        assert {f"out:{m.call_id}" for m in maps} <= {s for s, _ in reduce.prompt_segments}


def test_mixed_is_an_equal_mix():
    programs = make_programs("mixed", 100, seed=5)
    counts = {name: sum(p.workload == name for p in programs) for name in ("chatbot", "react", "mapreduce", "mcts")}
    assert counts == {"chatbot": 25, "react": 25, "mapreduce": 25, "mcts": 25}
    assert len({p.program_id for p in programs}) == 100


def test_tool_delays_off_by_default_and_heavy_tailed_when_on():
    assert all(c.delay_s == 0 for c in _calls(make_programs("react", 50, seed=1)))
    on = make_programs("react", 400, seed=1, tool_delays=True)
    off = make_programs("react", 400, seed=1)
    # switching pauses on changes nothing else
    assert [[(c.prompt_segments, c.output_tokens) for c in p.calls] for p in on] == [
        [(c.prompt_segments, c.output_tokens) for c in p.calls] for p in off
    ]
    delays = sorted(c.delay_s for c in _calls(on) if c.tool)
    p50 = delays[len(delays) // 2]
    p90 = delays[int(len(delays) * 0.9)]
    assert 0.2 < p50 < 0.45 and 8 < p90 < 20  # log-normal with p50 0.3 s, p90 13.6 s


def test_unknown_names_and_bad_input():
    with pytest.raises(ValueError, match="chatbot") as err:
        make_programs("nope", 3, seed=1)
    assert all(name in str(err.value) for name in WORKLOADS)
    with pytest.raises(ValueError, match="option"):
        make_programs("chatbot", 3, seed=1, bogus=1)
    with pytest.raises(ValueError):
        make_programs("chatbot", -1, seed=1)
    assert make_programs("mcts", 0, seed=1) == []


def test_poisson_arrivals():
    times = poisson_arrivals(2.0, 4000, seed=9)
    assert times == sorted(times) and times[0] > 0
    assert 1.9 < len(times) / times[-1] < 2.1
    assert poisson_arrivals(2.0, 10, seed=9) == times[:10]
    assert poisson_arrivals(2.0, 10, seed=10) != times[:10]
    for bad in (0, -1.0):
        with pytest.raises(ValueError):
            poisson_arrivals(bad, 10, seed=1)
    programs = with_arrivals(make_programs("chatbot", 10, seed=1), 2.0, seed=9)
    assert [p.arrival_s for p in programs] == times[:10]
