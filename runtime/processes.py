"""Child processes of the supervisor: own session (so a terminal's Ctrl-C reaches only the
supervisor, which then stops everything in order), output to a log file, and a stop that
escalates from SIGTERM to SIGKILL of the whole process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ManagedProcess:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    log_path: Path
    cwd: Path | None = None
    process: subprocess.Popen | None = field(default=None, init=False)

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(list(self.argv), env=dict(self.env), cwd=self.cwd, stdout=log_file,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, preexec_fn=die_with_parent)
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exit_code(self) -> int | None:
        """None while running (or never started)."""
        return None if self.process is None else self.process.poll()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        """Ask politely (SIGTERM to the process; services drain and exit)."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def wait_or_kill(self, timeout_s: float) -> int | None:
        """Wait up to `timeout_s` after `terminate()`, then SIGKILL the process group."""
        if self.process is None:
            return None
        deadline = time.monotonic() + timeout_s
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        try:  # whatever it started in its group goes too (it leads its own session)
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.process.wait(timeout=5)

    def log_tail(self, num_lines: int = 20) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(lines[-num_lines:])


def die_with_parent() -> None:
    """In the child, before exec: get SIGTERM if the supervisor dies (even by SIGKILL), so a
    crashed `autellix up` leaves no orphans. Linux only; elsewhere a no-op."""
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def python_module_argv(module: str, *args: str) -> list[str]:
    import sys

    return [sys.executable, "-m", module, *args]


def base_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env
