"""Units of issue 6's live pieces: the API's tool-hint parsing, the engine agent's session hints,
and the router's session affinity (no servers needed)."""

from __future__ import annotations

import math

import pytest

from services.engine_agent.session_hints import SessionHintBook
from services.router.affinity_chooser import AffinityChooser
from services.router.decision import RouteRequest
from services.router.engine_table import EngineState, EngineTable
from services.session_api.errors import ApiError
from services.session_api.tool_hints import MAX_IDLE_S, parse_idle_s, parse_tool_name
from shared.core.affinity import AffinityConfig
from shared.engine.api import EngineCall, output_segment_id
from shared.protocol import messages as m
from shared.protocol.programs import one_call_program_id


# --- the API's parsing --------------------------------------------------------------------------
@pytest.mark.parametrize("raw, want", [
    (None, None), ("", None), ("   ", None), ("run_tests", "run_tests"), ("  Run_Tests ", "run_tests"),
    ("browser:click", "browser:click"), ("x" * 64, "x" * 64),
])
def test_tool_names_are_normalised(raw, want):
    assert parse_tool_name(raw) == want


@pytest.mark.parametrize("raw", ["x" * 65, "rm -rf *", "a\tb", "naïve", "a;b", 5, ["run_tests"]])
def test_bad_tool_names_are_400(raw):
    with pytest.raises(ApiError) as info:
        parse_tool_name(raw)
    assert info.value.status == 400 and info.value.param == "next_tool"


@pytest.mark.parametrize("raw, want, clamped", [
    (None, None, False), ("2.5", 2.5, False), (0, 0.0, False), (-3, 0.0, True), ("1e12", MAX_IDLE_S, True),
    ("inf", MAX_IDLE_S, True), (float("inf"), MAX_IDLE_S, True),
])
def test_idle_estimates_are_clamped_and_reported(raw, want, clamped):
    value, notes = parse_idle_s(raw)
    assert value == want
    assert bool(notes) is clamped


def test_nan_idle_estimate_is_ignored_and_reported():
    value, notes = parse_idle_s("nan")
    assert value is None and notes and "NaN" in notes[0]


@pytest.mark.parametrize("raw", ["soon", True, [1.0], {"s": 1}])
def test_bad_idle_estimates_are_400(raw):
    with pytest.raises(ApiError) as info:
        parse_idle_s(raw)
    assert info.value.status == 400 and info.value.param == "next_tool_idle_s"


# --- the engine agent's session hints -------------------------------------------------------------
def _route(call_id: str, program_id: str, segments, next_tool=None, idle_s=None) -> m.RouteCall:
    return m.RouteCall(call_id=call_id, program_id=program_id, prompt_tokens=sum(n for _, n in segments),
                       prompt_segments=list(segments), max_tokens=8, reply_subject="r", next_tool=next_tool,
                       next_tool_idle_s=idle_s)


def _call(route: m.RouteCall) -> EngineCall:
    return EngineCall(call_id=route.call_id, program_id=route.program_id, thread_id="main",
                      prompt_segments=tuple(route.prompt_segments), max_output_tokens=8, arrival_s=0.0,
                      program_arrival_s=0.0, seq=0)


def test_hints_carry_the_declared_tool_and_the_observation_length():
    routes: dict[str, m.RouteCall] = {}
    book = SessionHintBook(lambda cid: routes.get(cid))
    first = routes["c1"] = _route("c1", "s1", [("sys", 100), ("task", 50)], "run_tests", 30.0)
    hint = book.hint(_call(first))
    assert (hint.session_id, hint.next_tool, hint.idle_hint_s, hint.obs_tokens, hint.last_in_session) == (
        "s1", "run_tests", 30.0, 0, False)
    assert book.hint(_call(first)) is hint  # computed once per call
    second = routes["c2"] = _route("c2", "s1", [("sys", 100), ("task", 50), (output_segment_id("c1"), 8),
                                                ("test output", 700)])
    hint2 = book.hint(_call(second))
    assert hint2.next_tool is None and hint2.obs_tokens == 700  # no hint: the engine infers from history


def test_a_call_without_a_session_is_the_last_of_its_program():
    routes = {"c9": _route("c9", one_call_program_id("c9"), [("p", 10)], "run_tests")}
    book = SessionHintBook(routes.get)
    assert book.hint(_call(routes["c9"])).last_in_session


def test_the_book_is_bounded():
    routes: dict[str, m.RouteCall] = {}
    book = SessionHintBook(routes.get, max_calls=4, max_sessions=3)
    for i in range(20):
        routes[f"c{i}"] = _route(f"c{i}", f"s{i}", [("p", 10)])
        book.hint(_call(routes[f"c{i}"]))
    assert len(book._hints) == 4 and len(book._last_context) == 3


# --- the router's session affinity ----------------------------------------------------------------
def _table(loads: dict[str, float]) -> EngineTable:
    table = EngineTable(ttl_s=10.0)
    for engine_id, load in loads.items():
        table.observe(EngineState(engine_id, load, 0, 0, 0, 100, last_seen_s=0.0))
    return table


def test_a_session_sticks_to_its_engine_even_when_it_is_busier():
    chooser = AffinityChooser(_table({"e0": 0.0, "e1": 10.0}), AffinityConfig())
    first = chooser.choose(RouteRequest("s1", 100, 10, None), now_s=1.0)
    assert first.engine_id == "e0" and chooser.pin_of("s1").epoch == 0
    # e0 is now loaded by s1's first call and more: s1 stays, a new session goes to e1
    chooser.table.add_load("e0", 1000)
    assert chooser.choose(RouteRequest("s1", 100, 10, None), now_s=1.0).engine_id == "e0"
    assert chooser.choose(RouteRequest("s2", 100, 10, None), now_s=1.0).engine_id == "e1"


def test_a_pin_moves_when_its_engine_leaves_and_one_call_programs_are_not_pinned():
    chooser = AffinityChooser(_table({"e0": 0.0, "e1": 5.0}), AffinityConfig())
    chooser.choose(RouteRequest("s1", 100, 10, None), now_s=1.0)
    chooser.table.remove("e0")
    moved = chooser.choose(RouteRequest("s1", 100, 10, None), now_s=1.0)
    assert moved.engine_id == "e1" and chooser.pin_of("s1").epoch == 1 and chooser.num_repins == 1
    chooser.choose(RouteRequest("call-x", 10, 1, None), now_s=1.0)
    assert chooser.pin_of("call-x") is None


def test_the_process_tables_primary_engine_seeds_an_unknown_session():
    chooser = AffinityChooser(_table({"e0": 0.0, "e1": 5.0}), AffinityConfig())
    assert chooser.choose(RouteRequest("s7", 100, 10, "e1"), now_s=1.0).engine_id == "e1"
    assert chooser.primary_engine("s7") == "e1"
    assert not math.isnan(chooser.table.loads(1.0)["e1"])
