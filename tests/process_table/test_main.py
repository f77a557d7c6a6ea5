"""`python -m services.process_table` starts from environment settings, answers health checks,
applies completions, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from migrations.runner import upgrade
from shared.bus import BusError
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.process_table.conftest import eventually, new_id

REPO_ROOT = Path(__file__).resolve().parents[2]


async def _healthy(bus) -> bool:
    try:
        status = await bus.request(subjects.health("process_table"), m.HealthCheck(), timeout_s=0.5)
    except BusError:
        return False
    return status.ok


async def test_module_runs_from_environment_and_stops_on_sigterm(nats_url, empty_database_url, bus, tmp_path) -> None:
    await asyncio.to_thread(upgrade, empty_database_url)  # the deploy step's migration, not the service's
    env = {**os.environ, "NATS_URL": nats_url, "DATABASE_URL": empty_database_url,
           "LOG_FORMAT": "json", "PYTHONPATH": str(REPO_ROOT)}
    log_path = tmp_path / "process_table.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "services.process_table"], env=env, cwd=REPO_ROOT,
                                stdout=log_file, stderr=subprocess.STDOUT)
    try:
        await eventually(lambda: _healthy(bus), timeout_s=60.0, every_s=0.2)
        pid = new_id("p")
        await bus.publish_event(m.CallCompleted(call_id=new_id("c"), program_id=pid, engine_id="e0",
                                                service_s=1.25, wait_s=0.5))

        async def applied() -> bool:
            try:
                info = await bus.request(subjects.session_lookup(), m.LookupSession(session_id=pid, tenant=""),
                                         timeout_s=1.0)
            except BusError:
                return False
            return info.num_completed_calls == 1 and info.service_s == 1.25

        await eventually(applied, timeout_s=20.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        exit_code = await asyncio.to_thread(proc.wait, 30)
    assert exit_code == 0, log_path.read_text()[-2000:]
    assert "process_table_stopping" in log_path.read_text()
