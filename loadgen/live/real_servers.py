"""What the benchmarks share: finding a tool, starting a server, waiting for it, stopping it, and
writing the result."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from loadgen.results_json import write_json

REPO_ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-bench-0123456789"


def installed_binary(name: str, install_hint: str) -> str:
    """The `name` launcher of this environment: beside this Python first (a venv not on PATH), then
    on PATH; a FileNotFoundError saying how to install it otherwise."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} is not installed: {install_hint}")
    return found


def free_port() -> int:
    from runtime.ports import free_port as _free

    return _free()


def wait_ready(url: str, proc: subprocess.Popen, deadline: float, state: Path) -> None:
    """Until `url` lists a served model (raises if the process ends or the deadline passes)."""
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not start; see {state}")
        try:
            r = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=2)
        except httpx.HTTPError:
            r = None
        if r is not None and r.status_code == 200:
            try:
                models = r.json()["data"]
            except (ValueError, KeyError, TypeError):
                raise RuntimeError(f"{url} answers, but not as an OpenAI API: another server holds its port; "
                                   f"see {state}") from None
            if models:
                return
        time.sleep(1.0)


def stop(proc: subprocess.Popen | None) -> None:
    """Ctrl-C, then a kill after 60 s."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(2)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()



def report(result: dict, path: Path | str | None, prog: str, argv: list[str] | None) -> int:
    """A bench's last step: the command line that produced `result` goes into it (`prog` and the
    arguments), then it is written to `path` (if given) and printed; the exit status."""
    result["command"] = prog + " " + " ".join(argv if argv is not None else sys.argv[1:])
    write_json(path, result)
    print(json.dumps(result, indent=1))
    return 0
