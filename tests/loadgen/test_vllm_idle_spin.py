"""The idle-spin probe's sampling: CPU shares per process in consecutive windows, and their
median over calls (the server it samples in a real run is vLLM's; here a child that spins)."""

from __future__ import annotations

import subprocess
import sys

from loadgen.live.vllm_idle_spin import WINDOW_S, _median_by_window, _windows


async def test_a_spinning_process_reads_about_a_core_and_a_finished_one_nothing():
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 2: pass"])
    try:
        windows = await _windows(spin.pid, 1.0)  # the spinner is the root: every share is its own
    finally:
        spin.wait()
    assert len(windows) == round(1.0 / WINDOW_S)
    assert max(sum(w.values()) for w in windows[2:]) > 0.5  # busy-looping takes a core
    assert all(sum(w.values()) == 0.0 for w in await _windows(spin.pid, 0.3))  # it has exited


def test_median_by_window_takes_each_window_over_the_calls():
    runs = [[{"w": 1.0}, {"w": 0.0}], [{"w": 0.9}, {"w": 0.1, "e": 0.2}], [{"w": 0.1}, {"w": 0.0}]]
    assert _median_by_window(runs) == {"e": [0.0, 0.0], "w": [0.9, 0.0]}
