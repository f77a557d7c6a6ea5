"""The ceiling runs' child processes: a child that dies before listening is named with its exit code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadgen.bench import servers


def test_a_child_that_exits_before_listening_is_reported_with_its_exit_code():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    with pytest.raises(RuntimeError, match="exited with 3 before listening"):
        servers.wait_port(servers.free_port(), proc, timeout_s=5.0)


def test_nothing_listening_in_time_is_a_timeout():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(TimeoutError):
            servers.wait_port(servers.free_port(), proc, timeout_s=0.3)
    finally:
        proc.kill()
        proc.wait()
