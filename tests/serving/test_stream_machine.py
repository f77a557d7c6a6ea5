"""The call stream's rules (services/session_api/stream_machine.py), over every (state, event) pair:
Hypothesis draws states, events and whole runs; a small grid is also walked exhaustively.

Invariants: a chunk is never yielded twice or out of order, nothing is placed again once a token
reached the client, the redispatch budget and the client's opt-out hold, every run ends in exactly
one of done and failed, and a failure carries the API's error code."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from services.session_api.stream_machine import (
    STREAM_CODES,
    Chunk,
    EngineLost,
    Fail,
    Finish,
    Hold,
    Lost,
    Phase,
    Placed,
    PlaceFailed,
    Reconnect,
    Redispatch,
    Rules,
    State,
    Tick,
    Yield,
    may_redispatch,
    step,
)

ENGINE_CODES = ("unavailable", "bad_request", "internal")  # what engines send in a chunk's error_code
TERMINAL = (Phase.DONE, Phase.FAILED)

times = st.floats(min_value=0, max_value=40, allow_nan=False)
rules_st = st.builds(Rules, call_id=st.just("c1"), hold_tokens=st.booleans(), allow_redispatch=st.booleans(),
                     max_redispatches=st.integers(0, 3), engine_ttl_s=st.sampled_from([1.0, 3.0]),
                     stalled_stream_grace_s=st.sampled_from([0.0, 2.0, 10.0]))
states = st.builds(State, phase=st.sampled_from(Phase), engine_id=st.sampled_from(["", "e0", "e1"]),
                   next_index=st.integers(0, 5), last_chunk_s=times, placements=st.integers(0, 4),
                   tokens_yielded=st.booleans(), held=st.integers(0, 4), engine_finished=st.booleans(),
                   lost=st.none() | st.sampled_from(Lost), gap=st.tuples(st.integers(0, 5), st.integers(0, 5)))
chunks = st.builds(Chunk, index=st.integers(0, 6), now_s=times, size=st.integers(0, 3), done=st.booleans(),
                   error_code=st.sampled_from(("",) * 6 + ENGINE_CODES), error_description=st.sampled_from(["", "x"]))
events = st.one_of(chunks, st.builds(Tick, times), st.builds(EngineLost, times, st.booleans(), st.booleans()),
                   st.builds(Reconnect, times), st.builds(Placed, st.sampled_from(["e0", "e1"]), times),
                   st.builds(PlaceFailed, st.just("no engine")))


def check_step(rules: Rules, state: State, event, after: State, actions: tuple) -> None:
    """What holds of one step from any state, reachable or not."""
    kinds = [type(a) for a in actions]
    if state.phase in TERMINAL:
        assert (after, actions) == (state, ()), "done and failed are final"
        return
    assert kinds.count(Yield) <= 1 and kinds.count(Fail) + kinds.count(Finish) <= 1
    if Yield in kinds or Hold in kinds:  # only the next chunk of a live placement
        assert state.phase is Phase.STREAMING and type(event) is Chunk and event.index == state.next_index
        assert after.next_index == event.index + 1
    for action in actions:
        if type(action) is Yield:
            assert action.held == rules.hold_tokens
            assert not action.held or (event.done and after.held > 0)
    if Redispatch in kinds:
        assert may_redispatch(rules, state) and not state.tokens_yielded
        assert after.phase is Phase.PLACING and state.phase is Phase.STREAMING
    assert after.placements in (state.placements, state.placements + 1)
    if after.placements > state.placements:
        assert state.phase is Phase.PLACING and type(event) is Placed and not actions
    assert (Fail in kinds) == (after.phase is Phase.FAILED)
    assert (Finish in kinds) == (after.phase is Phase.DONE)
    for action in actions:
        if type(action) is Fail:
            error = action.error
            assert error.status in (400, 500, 503) and error.message is not None
            engine_code = type(event) is Chunk and event.error_code
            assert error.code in STREAM_CODES or (engine_code and error.code == event.error_code)
            assert error.status != 503 or error.code in STREAM_CODES  # retryable ones are the API's own
    if after.tokens_yielded and not state.tokens_yielded:
        assert Yield in kinds


@settings(max_examples=400, deadline=None)
@given(rules_st, states, events)
def test_every_state_and_event(rules, state, event):
    after, actions = step(rules, state, event)
    check_step(rules, state, event, after, actions)


def test_a_grid_of_states_and_events_exhaustively():
    grid_rules = [Rules("c1", hold, allow, budget) for hold, allow, budget in
                  itertools.product((False, True), (False, True), (0, 1, 2))]
    grid_states = [State(phase=phase, engine_id="e0", next_index=1, last_chunk_s=5.0, placements=placements,
                         tokens_yielded=yielded, held=held, lost=lost, gap=(1, 3))
                   for phase, placements, yielded, held, lost in itertools.product(
                       Phase, (0, 1, 2, 3), (False, True), (0, 2), (None, *Lost))]
    grid_events = [Chunk(index, 6.0, size, done, code) for index, size, done, code in itertools.product(
                       (0, 1, 2), (0, 2), (False, True), ("", "unavailable", "bad_request", "internal"))]
    grid_events += [Tick(6.0), EngineLost(6.0), EngineLost(6.0, restarted=True), EngineLost(6.0, alone=True),
                    EngineLost(20.0),
                    Reconnect(6.0), Reconnect(20.0), Placed("e1", 6.0), PlaceFailed("x")]
    for rules, state, event in itertools.product(grid_rules, grid_states, grid_events):
        after, actions = step(rules, state, event)
        check_step(rules, state, event, after, actions)


# --- whole runs from a new stream, as the shell drives them ----------------------------------

@st.composite
def runs(draw):
    """Rules and a list of stream events; after each Redispatch the shell's placement outcome is
    drawn on the spot (see `drive`)."""
    return draw(rules_st), draw(st.lists(st.one_of(chunks, chunks, st.builds(Tick, times),
                                                   st.builds(EngineLost, times, st.booleans(), st.booleans()),
                                                   st.builds(Reconnect, times)), max_size=25))


def drive(rules: Rules, stream_events, place_ok) -> tuple[State, list, list]:
    """(final state, every action with the placement it belongs to, the yields as (placement, index))."""
    state, _ = step(rules, State(), Placed("e0", 0.0))
    log, yields = [], []

    def feed(event):
        nonlocal state
        before = state
        state, actions = step(rules, state, event)
        check_step(rules, before, event, state, actions)
        for action in actions:
            log.append(action)
            if type(action) is Yield:
                yields.append((state.placements, event.index))
            if type(action) is Redispatch:
                feed(Placed("e1", event.now_s) if place_ok() else PlaceFailed("no engine"))

    for event in stream_events:
        feed(event)
    # then the engine keeps restarting: each loss is placed again or fails, so the run must end
    for _ in range(rules.max_redispatches + 2):
        feed(EngineLost(50.0, restarted=True))
    return state, log, yields


@settings(max_examples=300, deadline=None)
@given(runs(), st.data())
def test_whole_runs(run, data):
    rules, stream_events = run
    state, log, yields = drive(rules, stream_events, lambda: data.draw(st.booleans(), label="placed"))
    kinds = [type(a) for a in log]
    # exactly one ending, and nothing after it
    assert state.phase in TERMINAL
    assert kinds.count(Fail) + kinds.count(Finish) == 1
    # never a chunk twice or out of order, all from one placement
    assert len({placement for placement, _ in yields}) <= 1
    indices = [index for _, index in yields]
    assert indices == sorted(set(indices))
    # nothing placed again once the client has a token; the budget and the opt-out hold
    if Yield in kinds:
        assert Redispatch not in kinds[kinds.index(Yield):]
    assert kinds.count(Redispatch) <= (rules.max_redispatches if rules.allow_redispatch else 0)
    assert state.redispatches <= rules.max_redispatches
    if rules.hold_tokens:  # a non-streaming client gets one answer, at the end
        assert kinds.count(Yield) <= 1 and (Yield not in kinds or kinds[-1] is Yield and Finish in kinds)


# --- a few runs spelled out ------------------------------------------------------------------

def _streaming(**fields) -> State:
    return State(phase=Phase.STREAMING, engine_id="e0", **fields)


def test_engine_lost_before_the_first_token_is_placed_again_then_restarts_at_chunk_0():
    rules = Rules("c1")
    state, actions = step(rules, _streaming(placements=1, next_index=2), EngineLost(5.0, alone=True))
    assert actions == (Redispatch(cancel_lost=False),) and state.phase is Phase.PLACING
    state, actions = step(rules, state, Placed("e1", 6.0))
    assert (state.phase, state.engine_id, state.next_index, state.redispatches) == (Phase.STREAMING, "e1", 0, 1)


def test_engine_lost_after_a_token_fails_with_engine_lost():
    state, (fail,) = step(Rules("c1", stalled_stream_grace_s=0.0),
                          _streaming(placements=1, tokens_yielded=True), EngineLost(5.0))
    assert state.phase is Phase.FAILED and fail.error.status == 503 and fail.error.code == "engine_lost"
    assert "engine e0 stopped responding and call c1 was lost" in fail.error.message


def test_opt_out_and_spent_budget_fail_at_once():
    for rules, placements in ((Rules("c1", allow_redispatch=False), 1), (Rules("c1", max_redispatches=2), 3)):
        _, (action,) = step(rules, _streaming(placements=placements), EngineLost(5.0, alone=True))
        assert type(action) is Fail and action.error.code == "engine_lost"


def test_a_gap_cancels_and_replaces_or_fails_naming_the_indices():
    _, actions = step(Rules("c1"), _streaming(placements=1, next_index=2), Chunk(4, 1.0, 1))
    assert actions == (Redispatch(cancel_lost=True),)
    _, (fail,) = step(Rules("c1"), _streaming(placements=1, next_index=2, tokens_yielded=True), Chunk(4, 1.0, 1))
    assert fail.error.code == "stream_gap" and "expected 2, got 4" in fail.error.message


def test_a_reconnect_counts_only_after_engine_ttl_of_silence():
    rules = Rules("c1", engine_ttl_s=3.0)
    assert step(rules, _streaming(placements=1, last_chunk_s=10.0), Reconnect(12.0))[1] == ()
    assert step(rules, _streaming(placements=1, last_chunk_s=10.0), Reconnect(14.0))[1] == (Redispatch(True),)
    _, (fail,) = step(rules, _streaming(placements=1, last_chunk_s=10.0, tokens_yielded=True), Reconnect(14.0))
    assert fail.error.code == "stream_interrupted"


def test_held_tokens_come_out_once_at_the_end():
    rules = Rules("c1", hold_tokens=True)
    state, actions = step(rules, _streaming(placements=1), Chunk(0, 1.0, size=2))
    assert Hold() in actions and Yield not in [type(a) for a in actions] and not state.tokens_yielded
    state, actions = step(rules, state, Chunk(1, 2.0, size=1, done=True))
    assert actions[-1] == Yield(held=True) and Finish() in actions and state.phase is Phase.DONE


def test_engine_errors_keep_their_status_and_code():
    expected = {"unavailable": (503, "engine_unavailable"), "bad_request": (400, "engine_rejected"),
                "internal": (500, "internal")}
    for code, (status, api_code) in expected.items():
        state, actions = step(Rules("c1"), _streaming(placements=1), Chunk(0, 1.0, done=True, error_code=code))
        assert actions[-1].error.status == status and actions[-1].error.code == api_code
        assert state.engine_finished  # nothing left to cancel
