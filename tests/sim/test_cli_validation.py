"""`autellix sim` refuses bad input with a clear message (exit 2) before simulating anything."""

from __future__ import annotations

import pytest

from autellix.cli import main


@pytest.mark.parametrize(("argv", "needle"), [
    (["--workload", "nope"], "valid workloads: "),
    (["--policies", "fcfs,lottery"], "valid policies: fcfs-v0, fcfs, mlfq, plas, atlas, srpt"),
    (["--preset", "gpt5-b200"], "valid presets: llama3.1-8b-a100"),
    (["--router", "random"], "valid routers: locality, least-loaded, round-robin"),
    (["--engine", "tpu"], "valid engines: lite, emulated"),
    (["--batching", "v2"], "valid: v0, v1"),
    (["--preemption", "drop"], "valid: recompute, swap"),
    (["--rates", "1,0,-2"], "rates must be positive, got 0, -2"),
    (["--rates", "1,abc"], "rates must be comma-separated numbers"),
    (["--slo", "-0.1"], "SLO must be positive"),
    (["--slo-multiple", "0"], "SLO multiples must be positive"),
    (["--engines", "0"], "--engines must be a positive integer"),
    (["--beta", "-3"], "beta must be a positive number or 'none'"),
    (["--programs", "1"], "--programs must be at least 2"),
])
def test_bad_input_is_a_clear_error(argv, needle, capsys):
    assert main(["sim", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err, err
