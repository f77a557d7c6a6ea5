"""The multi-host mesh: six hosts on one bridge, each service where a real deployment puts it.

    nats-1, nats-2, nats-3   one NATS node each: a 3-node cluster, streams at JETSTREAM_REPLICAS=3
    engine-a, engine-b       one engine agent each (lite backend), ENGINE_ID unset: the host's name
    control                  process table (PostgreSQL through a socket on its disk), router,
                             controller, session API
    (the switch)             the load client, as a client outside the cluster

Every service is given every NATS node (NATS_URL comma list) and connects as its own role.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from nats.js.api import StorageType, StreamConfig

from loadgen.chaos.stack import CHAOS_ENV
from loadgen.multihost.nats_cluster import ClusterTuning, client_url, start_node
from loadgen.multihost.netns import SUBNET_PREFIX, Host, make_switch
from runtime.catalog import SERVICES, HealthProbe
from runtime.catalog import service as catalog_service
from runtime.nats_auth import NatsCredentials
from runtime.processes import ManagedProcess, base_env, python_module_argv
from services.engine_agent.host_id import host_engine_id
from shared.bus import Bus, BusError
from shared.protocol.nats_roles import ADMIN, ENGINE_AGENT, engine_user

API_PORT = 8000
REPLICAS = 3
STREAM_MAX_BYTES = 256 << 20  # per stream: far above what a run writes
# the control host's services in the catalog's start order: all but the engines (one per engine
# host) and the front door (started last, once they answer)
CONTROL_SERVICES = tuple(s.name for s in SERVICES if not s.per_engine and s.probe is not HealthProbe.HTTP)


@dataclass
class MultiHostMesh:
    root: Path  # logs, NATS stores, credentials
    database_url: str  # PostgreSQL as the control host sees it
    tenant_keys: dict[str, str]
    nats_hosts: list[Host] = field(default_factory=lambda: [Host(f"nats-{i}", f"{SUBNET_PREFIX}.1{i}")
                                                            for i in (1, 2, 3)])
    engine_hosts: list[Host] = field(default_factory=lambda: [Host("engine-a", f"{SUBNET_PREFIX}.21"),
                                                              Host("engine-b", f"{SUBNET_PREFIX}.22")])
    control: Host = field(default_factory=lambda: Host("control", f"{SUBNET_PREFIX}.31"))
    tuning: ClusterTuning = field(default_factory=ClusterTuning)
    processes: dict[str, ManagedProcess] = field(default_factory=dict)
    credentials: NatsCredentials | None = None

    @property
    def hosts(self) -> list[Host]:
        return [*self.nats_hosts, *self.engine_hosts, self.control]

    @property
    def api_url(self) -> str:
        return f"http://{self.control.address}:{API_PORT}"

    @property
    def admin_url(self) -> str:
        return client_url(self.nats_hosts, self.credentials, ADMIN)

    # --- start ---------------------------------------------------------------------------------
    async def up(self, timeout_s: float = 90.0) -> float:
        """Hosts, the NATS cluster, then the services; returns the seconds it took."""
        t0 = time.monotonic()
        make_switch()
        for host in self.hosts:
            host.up()
        # each engine agent logs in as its own user; its id is its host's name (ENGINE_ID unset)
        self.credentials = NatsCredentials.load_or_create(self.root / "credentials.json",
                                                          [host_engine_id(h.name) for h in self.engine_hosts])
        for host in self.nats_hosts:
            self.processes[f"nats@{host.name}"] = start_node(host, self.nats_hosts, self.root, self.credentials,
                                                             self.tuning)
        await self._wait_for_jetstream(timeout_s)
        self._start(self.control, "process_table", {"DATABASE_URL": self.database_url})
        for name in CONTROL_SERVICES[1:]:
            self._start(self.control, name)
        for host in self.engine_hosts:
            # the outbox on the host's own disk: an agent started again there replays it
            self._start(host, "engine_agent", {"ENGINE_BACKEND": "lite",
                                               "ENGINE_OUTBOX_DIR": str(self.root / "disk" / host.name / "outbox")})
        self._start(self.control, "session_api", {"API_HOST": self.control.address, "API_PORT": str(API_PORT)})
        await self.wait_ready(timeout_s - (time.monotonic() - t0))
        return round(time.monotonic() - t0, 2)

    def _start(self, host: Host, service: str, env: dict[str, str] | None = None) -> ManagedProcess:
        user = engine_user(host_engine_id(host.name)) if service == ENGINE_AGENT else service
        env = base_env({**CHAOS_ENV, "NATS_URL": client_url(self.nats_hosts, self.credentials, user),
                        "JETSTREAM_REPLICAS": str(REPLICAS), "AUTELLIX_ENV": "development",
                        # three nodes on one disk each reserve every stream's max_bytes: keep it small
                        "AUDIT_MAX_BYTES": str(STREAM_MAX_BYTES), "COMPLETIONS_MAX_BYTES": str(STREAM_MAX_BYTES),
                        "AUTELLIX_API_KEYS": ",".join(f"{t}:{k}" for t, k in self.tenant_keys.items()),
                        **(env or {})})
        env.pop("ENGINE_ID", None)  # the engine's id comes from its host
        name = f"{service}@{host.name}"
        proc = ManagedProcess(name, host.argv(python_module_argv(catalog_service(service).module)), env,
                              self.root / "logs" / f"{name}.log").start()
        self.processes[name] = proc
        return proc

    async def _wait_for_jetstream(self, timeout_s: float) -> None:
        """Until a stream of REPLICAS replicas can be placed: a meta leader alone is not enough (a
        peer not yet in the meta group answers "insufficient resources" to an R3 stream), so a
        small probe stream is made and removed."""
        deadline = time.monotonic() + timeout_s
        last = ""
        probe = StreamConfig(name="MULTIHOST_PROBE", subjects=["multihost.probe"], num_replicas=REPLICAS,
                             storage=StorageType.MEMORY, max_bytes=1 << 20)
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                bus = await Bus.connect(self.admin_url, service="multihost", connect_timeout_s=2.0)
                try:
                    await bus.js.add_stream(probe)
                    await bus.js.delete_stream(probe.name)
                    return
                finally:
                    await bus.close()
            except (BusError, Exception) as exc:  # not formed yet: no meta leader, or a node not up
                last = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.3)
        raise TimeoutError(f"the NATS cluster formed no JetStream leader within {timeout_s:g} s ({last})")

    async def wait_ready(self, timeout_s: float, engines: set[str] | None = None) -> float:
        """Until the API answers with every engine (or `engines`) live and a session lookup works."""
        want = engines if engines is not None else {h.name for h in self.engine_hosts}
        key = next(iter(self.tenant_keys.values()))
        t0, last = time.monotonic(), "no answer"
        async with httpx.AsyncClient(base_url=self.api_url, timeout=2.0) as http:
            while time.monotonic() - t0 < timeout_s:
                self.check_alive()
                try:
                    health = (await http.get("/healthz")).json()
                    last = f"healthz {health}"
                    if want <= set(health.get("engines", ())):
                        probe = await http.get("/v1/sessions/s-probe", headers={"Authorization": f"Bearer {key}"})
                        last = f"session probe {probe.status_code}"
                        if probe.status_code == 404:
                            return round(time.monotonic() - t0, 2)
                except (httpx.HTTPError, ValueError) as exc:
                    last = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.2)
        raise TimeoutError(f"mesh not ready within {timeout_s:g} s: {last} (logs in {self.root / 'logs'})")

    # --- faults and state ----------------------------------------------------------------------
    def check_alive(self, allowed_dead: set[str] = frozenset()) -> None:
        dead = [f"{n} (exit {p.exit_code()}): {p.log_tail(5)}" for n, p in self.processes.items()
                if not p.alive() and n not in allowed_dead]
        if dead:
            raise RuntimeError("a process of the mesh died: " + "; ".join(dead))

    def kill(self, name: str) -> None:
        """SIGKILL, as a crash (no drain, no goodbye)."""
        proc = self.processes[name]
        proc.process.kill()
        proc.process.wait(timeout=10)

    def restart(self, name: str) -> ManagedProcess:
        """Start a stopped service again on its host, as its supervisor (systemd, the kubelet) would."""
        old = self.processes[name]
        self.processes[name] = ManagedProcess(old.name, old.argv, old.env, old.log_path).start()
        return self.processes[name]

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def down(self) -> None:
        for proc in reversed(list(self.processes.values())):
            proc.terminate()
        for proc in reversed(list(self.processes.values())):
            proc.wait_or_kill(5.0)
        for host in self.hosts:
            host.down()
