"""`autellix up --backend vllm --model tiny` as a child process, for one policy and vLLM flags."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from loadgen.live.stack_process import StackProcess, _wait_ready


def start_real_stack(policy: str, port: int, vllm_args: str, ready_timeout_s: float = 420.0,
                     extra_env: dict[str, str] | None = None) -> StackProcess:
    state_dir = Path(tempfile.mkdtemp(prefix=f"autellix-calib-{policy}-", dir="/tmp"))
    api_key = f"sk-calib-{secrets.token_urlsafe(12)}"
    env = {**os.environ, "SCHEDULING_POLICY": policy, "AUTELLIX_API_KEYS": f"calib:{api_key}",
           "AUTELLIX_ENV": "development", "LOG_LEVEL": os.environ.get("LOG_LEVEL", "warning"),
           "HF_HUB_OFFLINE": "1", **(extra_env or {})}
    log_path = Path(tempfile.gettempdir()) / f"autellix-calib-{policy}-up.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "autellix", "up", "--engines", "1", "--port", str(port), "--backend", "vllm",
             "--model", "tiny", "--vllm-args", vllm_args, "--nats-port", "0", "--state-dir", str(state_dir),
             "--startup-timeout", str(ready_timeout_s)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stack = StackProcess(proc, state_dir, f"http://127.0.0.1:{port}", api_key, log_path)
    try:
        _wait_ready(stack, 1, ready_timeout_s)
    except BaseException:
        stack.stop()
        raise
    return stack
