"""`python -m loadgen.calibrate.call_timeline` at a tiny size on a real engine: a burst's calls are
each found in the engine's step log, and every process's CPU is charged by name. Bad input is
refused before a stack starts. No timing is asserted."""

from __future__ import annotations

import json

import pytest

from loadgen.calibrate.call_timeline import main as call_timeline_main
from runtime.ports import free_port
from tests.vllm.needs_vllm import require_vllm


def test_a_tiny_burst_finds_each_call_in_the_step_log(tmp_path):
    require_vllm()
    out = tmp_path / "timeline.json"
    code = call_timeline_main(["burst", "--calls", "2", "--output-tokens", "4", "--port", str(free_port()),
                               "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["mode"] == "burst" and result["cpu_placement"]["placement"] == "float"
    calls = result["calls"]
    assert len(calls) == 2
    for call in calls:
        assert call["prefill_end_ms"] is not None, call  # its prefill was found by its context
        assert call["sent_ms"] <= call["first_token_ms"] <= call["end_ms"]
    assert {"services.session_api", "services.engine_agent"} <= set(result["process_cpu_s"])


@pytest.mark.parametrize(("args", "says"), [
    (["programs", "--workload", "nope"], "unknown workload 'nope'; valid workloads:"),
    (["programs", "--rate", "0"], "--rate must be > 0"),
    (["programs", "--fit", "/nonexistent/fit.json"], "no such file"),
    (["burst", "--calls", "0"], "must be >= 1"),
])
def test_bad_input_is_refused_before_a_stack_starts(args, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        call_timeline_main(args)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err
