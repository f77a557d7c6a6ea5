"""The process supervisor behind `autellix up`.

Order of work: NATS (embedded unless NATS_URL is given) -> PostgreSQL (embedded unless
DATABASE_URL) -> `alembic upgrade head` -> every installed service as its own process -> health
checks (NATS HealthCheck, engine heartbeats, HTTP /healthz; every instance of a service with
several, each told apart) -> with `--cpu-placement`, every process placed around vLLM's CPU
worker (runtime/cpu_placement.py) -> ready. It then waits for Ctrl-C /
SIGTERM or for a child to die, and stops everything: the front door first, then the other services
together get SIGTERM and `stop_timeout_s` to drain, then SIGKILL of their process group;
PostgreSQL gets a fast shutdown, NATS a SIGTERM. Nothing is left running (children also get
SIGTERM if the supervisor itself is killed; only PostgreSQL, daemonized by pg_ctl, would survive
that, and the next `autellix up` on the same state dir reuses it).

NATS requires authentication: every service connects as its role (shared/protocol/nats_roles.py),
each engine agent as its own user (engine_agent.<ENGINE_ID>), with the password kept in
nats/credentials.json (0600, made on first start); the supervisor's own
health checks and the CLI tools use the read-only `cli` role.

State folder layout: nats/ (JetStream store, credentials.json, nats.conf), pg/ (PostgreSQL data), logs/<process>.log, up.json
(URLs and pids of the running stack, read by `autellix events tail`; 0600: its NATS URL carries
the `cli` role's password), metrics.json (every process's
Prometheus target, file_sd format: runtime/metrics_targets.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from runtime import cpu_placement
from runtime.catalog import (
    SERVICES,
    HealthProbe,
    Instance,
    ServiceSpec,
    StackOptions,
    plan,
    with_own_port,
)
from runtime.metrics_targets import TARGETS_NAME, MetricsPorts
from runtime.nats_auth import write_private
from runtime.nats_server import NatsServer
from runtime.ports import free_port
from runtime.postgres import EmbeddedPostgres
from runtime.processes import ManagedProcess, base_env, python_module_argv
from shared.bus import Bus
from shared.bus.connection import redact_url
from shared.logging import configure_logging
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import decode
from shared.protocol.errors import ProtocolError
from shared.protocol.nats_roles import CLI, SERVICE_ROLES

DEFAULT_STATE_DIR = Path("/var/lib/autellix")
MANIFEST_NAME = "up.json"


class StartupFailed(RuntimeError):
    pass


@dataclass
class StackConfig:
    state_dir: Path = DEFAULT_STATE_DIR
    options: StackOptions = field(default_factory=StackOptions)
    nats_url: str | None = None  # external NATS; None starts the embedded one
    database_url: str | None = None  # external PostgreSQL; None starts the embedded one
    nats_port: int = 4222  # embedded NATS; 0 picks a free port
    environment: str = "development"
    log_level: str = "info"
    api_keys: str | None = None  # AUTELLIX_API_KEYS; None in development makes a dev key
    startup_timeout_s: float = 60.0
    stop_timeout_s: float = 35.0  # past the services' own drain deadlines (30 s by default)
    migrate: bool = True
    cpu_placement: str = "float"  # runtime/cpu_placement.py, applied once every service is healthy
    services: tuple[ServiceSpec, ...] = SERVICES  # the catalog (tests substitute their own)


def read_manifest(state_dir: Path) -> dict | None:
    try:
        return json.loads((Path(state_dir) / MANIFEST_NAME).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def migrations_dir() -> Path | None:
    """The project's migrations/ folder (found on disk, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("migrations")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / "alembic.ini").is_file():
            return Path(loc)
    return None


class Stack:
    def __init__(self, cfg: StackConfig, say: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.say = say or (lambda line: print(f"autellix up: {line}", flush=True))
        self.state_dir = Path(cfg.state_dir).resolve()
        self.nats: NatsServer | None = None
        self.postgres: EmbeddedPostgres | None = None
        self.processes: list[ManagedProcess] = []
        self.instances: list[Instance] = []
        self.nats_url = cfg.nats_url or ""
        self.database_url = cfg.database_url or ""
        self.api_keys = cfg.api_keys or ""
        self.metrics = MetricsPorts(cfg.options)
        self._stopped = False
        self.placement: dict = {"placement": "float"}

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    # --- start -------------------------------------------------------------------------------
    async def start(self, interrupted: asyncio.Event) -> None:
        """Bring the stack up; raises StartupFailed (the caller then calls `stop()`)."""
        self.instances, skipped = plan(self.cfg.options, self.cfg.services)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        if skipped:
            self.say(f"not installed, skipped: {', '.join(skipped)}")
        self.say(f"services: {', '.join(i.name for i in self.instances) or 'none'}")
        self._start_nats()
        if any(i.needs_database for i in self.instances) or self.cfg.database_url:
            self._start_postgres()
            if self.cfg.migrate:
                self._migrate()
        if not self.api_keys and self.cfg.environment == "development":
            self.api_keys = f"dev:sk-dev-{secrets.token_urlsafe(18)}"
            self.say(f"development API key (tenant 'dev'): {self.api_keys.split(':', 1)[1]}")
        for index, inst in enumerate(self.instances):
            self.instances[index] = self._start_service(inst)
        self._write_manifest()
        if self.metrics.by_instance:
            self.say(f"Prometheus targets (/metrics) in {self.metrics.write(self.state_dir)}: {self.metrics.summary()}")
        await self._wait_healthy(interrupted)
        if self.cfg.cpu_placement != "float":
            self._place()

    def _place(self) -> None:
        """Every process of the stack (PostgreSQL is daemonized, so its own tree) placed around vLLM's
        CPU workers; the services start no process after they are healthy, so once is enough."""
        roots = (os.getpid(),) + ((self.postgres.pid,) if self.postgres is not None and self.postgres.pid else ())
        try:
            self.placement = cpu_placement.place(self.cfg.cpu_placement, roots)
        except RuntimeError as exc:
            raise StartupFailed(f"--cpu-placement {self.cfg.cpu_placement}: {exc}") from None
        p = self.placement
        self.say(f"CPU placement {p['placement']}: vLLM's worker on cores {p['worker_cpus']}, its engine core on "
                 f"{p['engine_core_cpus']}, every other process on {p['other_cpus']}")
        self._write_manifest()

    def _start_nats(self) -> None:
        if self.nats_url:
            self.say(f"using external NATS at {redact_url(self.nats_url)}")
            return
        self.nats = NatsServer(self.state_dir / "nats", port=self.cfg.nats_port,
                               log_path=self.log_dir / "nats.log",  # a user per engine it starts:
                               engine_ids=tuple(i.env["ENGINE_ID"] for i in self.instances if "ENGINE_ID" in i.env))
        self.nats.start()
        self.nats_url = self.nats.url  # the admin's: for in-process tools; services get their role's
        self.say(f"NATS (JetStream) at {self.nats.address}, store {self.nats.store_dir}, role credentials in "
                 f"{self.nats.credentials_path}")

    def nats_url_for(self, role: str, engine_id: str = "") -> str:
        """A role's URL (an engine's own, given its id) on the embedded server; an external
        NATS_URL is used as given (its own auth)."""
        if self.nats is None:
            return self.nats_url
        return self.nats.engine_url(engine_id) if engine_id else self.nats.url_for(role)

    def _start_postgres(self) -> None:
        if self.database_url:
            self.say("using external PostgreSQL (DATABASE_URL)")
            return
        t0 = time.monotonic()
        self.postgres = EmbeddedPostgres(self.state_dir / "pg").start()
        self.database_url = self.postgres.database_url
        self.say(f"PostgreSQL at {self.postgres.data_dir} (Unix socket) in {time.monotonic() - t0:.1f} s")

    def _migrate(self) -> None:
        folder = migrations_dir()
        if folder is None:
            self.say("no migrations/ folder found: schema not migrated")
            return
        log_path = self.log_dir / "migrations.log"
        with open(log_path, "ab") as log_file:
            done = subprocess.run(python_module_argv("alembic", "-c", str(folder / "alembic.ini"), "upgrade", "head"),
                                  env=base_env({"DATABASE_URL": self.database_url}), cwd=folder.parent,
                                  stdout=log_file, stderr=subprocess.STDOUT, timeout=300)
        if done.returncode != 0:
            raise StartupFailed(f"alembic upgrade head failed (exit {done.returncode}); see {log_path}")
        self.say("migrations applied (alembic upgrade head)")

    def _service_env(self, inst: Instance) -> dict[str, str]:
        role = inst.module.rpartition(".")[2]
        url = (self.nats_url_for(role, inst.env.get("ENGINE_ID", "")) if role in SERVICE_ROLES
               else (self.nats.address if self.nats else self.nats_url))
        env = {"NATS_URL": url, "AUTELLIX_ENV": self.cfg.environment, "LOG_LEVEL": self.cfg.log_level,
               **inst.env}
        if self.database_url:
            env["DATABASE_URL"] = self.database_url
        if role == "engine_agent" and "ENGINE_OUTBOX_DIR" not in os.environ:
            env.setdefault("ENGINE_OUTBOX_DIR", str(self.state_dir / "engine-outbox"))  # beside the stack's state
        if self.api_keys:
            env["AUTELLIX_API_KEYS"] = self.api_keys
        return base_env(env)

    def _start_service(self, inst: Instance) -> Instance:
        if inst.env.get("API_REUSE_PORT") == "true":  # its own port picked now: the less time to lose it
            inst = with_own_port(inst, self.cfg.options.host, free_port(self.cfg.options.host))
        env = self._service_env(inst) | self.metrics.env_for(inst)
        proc = ManagedProcess(inst.name, python_module_argv(inst.module), env,
                              self.log_dir / f"{inst.name}.log").start()
        self.processes.append(proc)
        return inst

    def _write_manifest(self) -> None:
        opts = self.cfg.options
        manifest = {
            "nats_url": self.nats_url_for(CLI),
            "api_url": f"http://{opts.host}:{opts.port}",
            "state_dir": str(self.state_dir),
            "supervisor_pid": os.getpid(),
            "pids": {p.name: p.pid for p in self.processes},
            "metrics": {name: f"http://{target}/metrics" for name, target in self.metrics.by_instance.items()},
            "nats_pid": self.nats.pid if self.nats else None,
            "postgres_pid": self.postgres.pid if self.postgres else None,
            "cpu_placement": self.placement,
        }
        write_private(self.state_dir / MANIFEST_NAME, json.dumps(manifest, indent=2))

    async def _wait_healthy(self, interrupted: asyncio.Event) -> None:
        if not self.instances:
            return
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        bus = await Bus.connect(self.nats_url_for(CLI), service="supervisor", connect_timeout_s=5.0)
        heartbeats: set[str] = set()

        async def on_heartbeat(msg) -> None:
            heartbeats.add(msg.body.engine_id)
        await bus.subscribe(subjects.all_engine_heartbeats(), on_heartbeat, types=(m.EngineHeartbeat,))
        pending = {inst.name: inst for inst in self.instances}
        pids = {p.name: p.pid for p in self.processes}
        try:
            async with httpx.AsyncClient(timeout=1.0) as http:
                while pending:
                    self._check_children()
                    if interrupted.is_set():
                        raise StartupFailed("interrupted during startup")
                    answered = await self._nats_answers(bus, pending.values())
                    for name, inst in list(pending.items()):
                        if inst.probe is HealthProbe.NATS:
                            healthy = pids[name] in answered.get(inst.probe_target, ())
                        else:
                            healthy = await self._probe(inst, http, heartbeats)
                        if healthy:
                            del pending[name]
                            self.say(f"{name} healthy")
                    if pending and time.monotonic() > deadline:
                        raise StartupFailed(f"not healthy after {self.cfg.startup_timeout_s:g} s: "
                                            f"{'; '.join(map(_unanswered, pending.values()))} (logs in {self.log_dir})")
                    if pending:
                        await asyncio.sleep(0.1)
        finally:
            await bus.close()

    async def _nats_answers(self, bus: Bus, pending) -> dict[str, set[int]]:
        """Per bus service still pending, the pids of its instances that answer HealthCheck ok.
        Every instance answers `health.<service>` (a plain request would take the first reply,
        so one of two routers would pass for both): the replies are gathered for a short while
        and told apart by the pid in their instance id."""
        expected: dict[str, int] = {}
        for inst in pending:
            if inst.probe is HealthProbe.NATS:
                expected[inst.probe_target] = expected.get(inst.probe_target, 0) + 1
        answers = await asyncio.gather(*(_gather_health(bus, service, n) for service, n in expected.items()))
        return dict(zip(expected, answers, strict=True))

    async def _probe(self, inst: Instance, http: httpx.AsyncClient, heartbeats: set[str]) -> bool:
        if inst.probe is HealthProbe.HEARTBEAT:
            return inst.probe_target in heartbeats
        try:  # one worker: the API port; several: each worker's own port (catalog.py)
            resp = await http.get(inst.probe_target)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    def _check_children(self) -> None:
        for proc in self.processes:
            code = proc.exit_code()
            if code is not None:
                raise StartupFailed(f"{proc.name} exited with code {code}; last lines of {proc.log_path}:\n"
                                    f"{proc.log_tail()}")

    # --- run and stop -----------------------------------------------------------------------------
    async def supervise(self, stop: asyncio.Event) -> int:
        """Wait for a stop request (0) or an unexpected child exit (1)."""
        while not stop.is_set():
            for proc in self.processes:
                code = proc.exit_code()
                if code is not None:
                    self.say(f"{proc.name} exited unexpectedly with code {code}; stopping the stack. "
                             f"Last lines of {proc.log_path}:\n{proc.log_tail()}")
                    return 1
            try:
                await asyncio.wait_for(stop.wait(), timeout=0.5)
            except TimeoutError:
                pass
        return 0

    def stop(self) -> None:
        """Stop everything in reverse start order; safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        # The front door (started last) closes first so no new work comes in; the rest then drain
        # together (what they still publish to JetStream is durable, so their order does not matter).
        ordered = list(reversed(self.processes))
        front = sum(1 for p in ordered if p.name.split("-")[0] == ordered[0].name.split("-")[0]) if ordered else 0
        for batch in (ordered[:front], ordered[front:]):  # every API worker first
            for proc in batch:
                proc.terminate()
            for proc in batch:
                code = proc.wait_or_kill(self.cfg.stop_timeout_s)
                self.say(f"{proc.name} stopped (exit {code})")
        if self.postgres is not None:
            self.postgres.stop()
            self.say("PostgreSQL stopped")
        if self.nats is not None:
            self.nats.stop()
            self.say("NATS stopped")
        for name in (MANIFEST_NAME, TARGETS_NAME):
            if (self.state_dir / name).exists():
                (self.state_dir / name).unlink()


def _unanswered(inst: Instance) -> str:
    if inst.probe is HealthProbe.NATS:
        return f"{inst.name} (no ok HealthCheck answer from its pid on {subjects.health(inst.probe_target)})"
    if inst.probe is HealthProbe.HEARTBEAT:
        return f"{inst.name} (no heartbeat from engine {inst.probe_target})"
    return f"{inst.name} (no 200 from {inst.probe_target})"


def instance_pid(instance_id: str) -> int | None:
    """The pid in a bus instance id (`<service>.<host>.<pid>.<hex>`, envelope.make_publisher_id;
    the host may hold dots, the tail does not)."""
    parts = instance_id.rsplit(".", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


async def _gather_health(bus: Bus, service: str, expected: int, window_s: float = 0.5) -> set[int]:
    """The pids of the instances of `service` that answer HealthCheck ok within `window_s`
    (sooner once `expected` have)."""
    replies: asyncio.Queue = asyncio.Queue()

    async def on_reply(raw) -> None:
        replies.put_nowait(raw.data)
    inbox = bus.nc.new_inbox()
    sub = await bus.nc.subscribe(inbox, cb=on_reply)
    pids: set[int] = set()
    try:
        await bus.publish(subjects.health(service), m.HealthCheck(), reply=inbox)
        deadline = time.monotonic() + window_s
        while len(pids) < expected and (left := deadline - time.monotonic()) > 0:
            try:
                data = await asyncio.wait_for(replies.get(), left)
            except TimeoutError:
                break
            try:
                status = decode(data).body
            except ProtocolError:
                continue  # not a health reply: that instance is not (yet) healthy
            if isinstance(status, m.HealthStatus) and status.ok and (pid := instance_pid(status.instance_id)):
                pids.add(pid)
    finally:
        await sub.unsubscribe()
    return pids


async def run_stack(cfg: StackConfig, on_ready: Callable[[Stack], None] | None = None) -> int:
    """Start, serve until SIGINT/SIGTERM (or a child dies), stop. Returns the exit status."""
    import signal

    configure_logging("supervisor", environment=cfg.environment, level="warning")  # our lines are `say`s
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stack = Stack(cfg)
    try:
        try:
            await stack.start(stop)
        except StartupFailed as exc:
            print(f"autellix up: startup failed: {exc}", file=sys.stderr, flush=True)
            return 1
        stack.say(f"ready: API {stack.cfg.options.host}:{stack.cfg.options.port}, NATS {redact_url(stack.nats_url)}, "
                  f"logs {stack.log_dir} (Ctrl-C stops everything)")
        if on_ready:
            on_ready(stack)
        return await stack.supervise(stop)
    finally:
        stack.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
