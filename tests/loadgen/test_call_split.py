"""Splitting a live call's time: a client call pairs with the engine's call of the same thread and
prompt length taken first at or after it was sent; the parts add up to the call's time."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from loadgen.calibrate.call_split import hop_split, match, read_hop_marks, split, summarize, with_engine_load
from shared.engine.step_log import StepLog, calls_path


def _client(thread: str, prompt: int, sent: float, end: float) -> dict:
    return {"thread_id": thread, "prompt_tokens": prompt, "sent_s": sent, "first_token_s": None, "end_s": end}


def _engine(thread: str, prompt: int, added: float, finish: float, wait: float = 0.0) -> dict:
    return {"thread_id": thread, "prompt_tokens": prompt, "added_s": added, "first_token_s": added,
            "finish_s": finish, "wait_s": wait}


def test_calls_pair_by_thread_and_prompt_in_time_order():
    client = [_client("map1", 300, 10.0, 12.0), _client("map1", 300, 11.0, 13.0), _client("map2", 300, 10.0, 12.5)]
    engine = [_engine("map1", 300, 11.1, 12.9), _engine("map2", 300, 10.2, 12.4), _engine("map1", 300, 10.1, 11.9)]
    pairs = match(client, engine)
    assert [(c["sent_s"], e["added_s"]) for c, e in pairs] == [(10.0, 10.1), (10.0, 10.2), (11.0, 11.1)]


def test_an_engine_call_taken_before_the_client_sent_or_of_another_length_is_not_a_match():
    client = [_client("main", 300, 10.0, 12.0)]
    assert match(client, [_engine("main", 300, 9.9, 11.0)]) == []
    assert match(client, [_engine("main", 301, 10.1, 11.0)]) == []


def test_the_parts_add_up_and_the_engine_s_load_at_send_is_counted():
    client = [_client("a", 10, 0.0, 1.0), _client("b", 20, 0.5, 2.0)]
    engine = [_engine("a", 10, 0.05, 0.9, wait=0.2), _engine("b", 20, 0.6, 1.9)]
    rows = with_engine_load(split(match(client, engine)), engine)
    a, b = rows
    assert a["to_engine_s"] == pytest.approx(0.05) and a["back_s"] == pytest.approx(0.1)
    assert a["in_engine_s"] == pytest.approx(0.85) and a["waiting_s"] == 0.2
    assert (a["engine_calls_at_send"], b["engine_calls_at_send"]) == (0, 1)
    summary = summarize(rows)
    assert summary["path_s"]["n"] == 2
    assert set(summary["path_by_engine_calls_at_send"]) == {"0", "1-2"}


def test_the_engine_writes_one_line_per_finished_call_beside_its_step_log(tmp_path):
    log = StepLog(str(tmp_path / "run-steps.jsonl"))
    assert calls_path(log.path) == str(tmp_path / "run-steps-calls.jsonl")
    log.call_added("r1", "mesh-call-1")
    call = SimpleNamespace(thread_id="main", prompt_tokens=12, output_tokens=3, first_token_s=5.0, finish_s=6.0,
                           wait_s=0.5, preemptions=0)
    log.call_finished("r1", call)
    log.call_finished("never-added", call)  # a call the log did not see arrive: no line
    log.call_added("r2")
    log.call_finished("r2", None)  # a request the scheduler did not track: forgotten, no line
    [line] = (tmp_path / "run-steps-calls.jsonl").read_text().splitlines()
    row = json.loads(line)
    assert row["request_id"] == "r1" and row["call_id"] == "mesh-call-1" and row["prompt_tokens"] == 12 and row["finish_s"] == 6.0
    assert row["added_s"] > 0


def test_the_path_to_the_engine_splits_at_the_mesh_s_hops_for_lone_and_fan_out_calls(tmp_path):
    def client(session: str, sent: float) -> dict:
        return {**_client("main", 10, sent, sent + 5.0), "session_id": session, "call_id": f"{session}-{sent}",
                "sent_wall_s": sent + 1000.0}
    calls = [client("lone", 1.0), client("fan", 2.0), client("fan", 2.01)]
    engine = [{**_engine("main", 10, c["sent_s"] + 0.2, c["sent_s"] + 1.0), "call_id": f"mesh-{i}"}
              for i, c in enumerate(calls)]
    with (tmp_path / "1.log").open("w") as f:  # wall-clock ns, as loadgen/live/hop_marks writes them
        for i, c in enumerate(calls):
            wall = c["sent_wall_s"]
            for name, after in (("api_start_in", 0.01), ("api_route_in", 0.03), ("e_cmd_in", 0.04),
                                ("e_engine_in", 0.05)):
                f.write(f"{round((wall + after) * 1e9)} mesh-{i} {name}\n")
    hops = hop_split(match(calls, engine), read_hop_marks(str(tmp_path)), wall_offset_s=None)
    assert hops["alone"]["client -> API"]["n"] == 1 and hops["with others"]["client -> API"]["n"] == 2
    by_hop = hops["with others"]
    assert by_hop["client -> API"]["p50_ms"] == pytest.approx(10, abs=0.01)
    assert by_hop["API: limits, session"]["p50_ms"] == pytest.approx(20, abs=0.01)
    assert by_hop["vLLM front end -> scheduler"]["p50_ms"] == pytest.approx(150, abs=0.01)
