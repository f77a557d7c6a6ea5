"""Child processes of the ceiling runs: started, waited for, stopped, each with its pid for CPU."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from runtime.ports import free_port, wait_for_tcp

__all__ = ["free_port", "start_module", "stop", "wait_port"]

REPO_ROOT = Path(__file__).resolve().parents[2]


def wait_port(port: int, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Until `proc` listens on `port`; RuntimeError (with its exit code) if it dies first."""
    try:
        wait_for_tcp("127.0.0.1", port, timeout_s, alive=lambda: proc.poll() is None)
    except RuntimeError:
        raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before listening on {port}") from None


def start_module(module: str, *args: str, env: dict | None = None, ready_line: str | None = None,
                 timeout_s: float = 30.0) -> subprocess.Popen:
    """`python -m module args`; with `ready_line`, returns once the child printed it."""
    proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE if ready_line else subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    if ready_line:
        deadline = time.monotonic() + timeout_s
        while True:
            line = proc.stdout.readline()
            if line.strip() == ready_line:
                return proc
            if not line and proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError(f"python -m {module} did not get ready (exit {proc.returncode})")
    return proc


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
