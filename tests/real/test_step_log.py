"""`ENGINE_STEP_LOG`: the real engine serving the mesh logs each of its steps (wall time and work,
shared/engine/step_log.py) in the lines the CPU fit reads, so the engine can be profiled as it
serves (loadgen.calibrate.live_vs_sim --step-log-dir)."""

from __future__ import annotations

import time

from loadgen.calibrate.fit_cpu import features, read_steps
from tests.real.conftest import STEP_LOG_NAME


def test_the_serving_engine_logs_every_step_with_its_work(real_engines):
    mesh, _ = real_engines
    log = mesh.log.parent / STEP_LOG_NAME
    before = len(read_steps(str(log))["steps"]) if log.exists() and log.stat().st_size else 0
    answer = mesh.client().completions.create(model="tiny", prompt="one two three four five six seven",
                                              max_tokens=6, extra_body={"ignore_eos": True})
    assert answer.usage.completion_tokens == 6
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        steps = read_steps(str(log))["steps"] if log.exists() and log.stat().st_size else []
        if len(steps) >= before + 6:  # a prefill, then a step per further token at least
            break
        time.sleep(0.2)
    new = steps[before:]
    assert len(new) >= 6, new
    prompt = answer.usage.prompt_tokens
    assert any(chunks and chunks[0][0] >= 1 and chunks[0][1] <= prompt for chunks in (s["chunks"] for s in new))
    for step in new:
        assert step["duration_s"] > 0 and step["tokens"] >= 1 and step["thread_cpu_s"] >= 0
        assert step["num_decodes"] == step["tokens"] - sum(n for n, _ in step["chunks"])
        assert len(features(step)) == 4  # what fit_cpu regresses on
