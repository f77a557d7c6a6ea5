"""The services `autellix up` runs, as data: add a row to add a service.

A row names the Python module (`python -m <module>`), how many instances it gets, the extra
environment of each instance, and how the supervisor knows it is healthy. Rows whose package is
not installed are skipped (and logged), so the stack runs with whatever services exist.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from shared.engine.registry import all_backends


class HealthProbe(StrEnum):
    NATS = "nats"  # answers HealthCheck on subjects.health(<bus service>)
    HEARTBEAT = "heartbeat"  # an EngineHeartbeat from its ENGINE_ID
    HTTP = "http"  # GET http://API_HOST:API_PORT/healthz (or /livez in a stack without engines) answers 200;
    # with several workers, each on its own API_WORKER_PORT


@dataclass(frozen=True)
class StackOptions:
    port: int = 8000  # the HTTP API
    host: str = "127.0.0.1"
    engines: int = 2
    backend: str = "lite"
    only: tuple[str, ...] = ()  # run just these services (names from SERVICES); empty: all installed
    model: str = ""  # backend vllm: model folder, hub id, or "tiny"
    vllm_args: str = ""  # backend vllm: further `vllm serve` flags for every engine
    tiny_model_dir: str = ""  # backend vllm with --model tiny: where the tiny model is made
    upstreams: tuple[str, ...] = ()  # backend upstream: one `vllm serve` URL per engine
    api_workers: int = 1  # session_api processes, all on `port` (SO_REUSEPORT: the kernel spreads connections)
    routers: int = 1  # router processes (one queue group: they share the calls)

    def engine_env(self, index: int) -> dict[str, str]:
        env = {"ENGINE_ID": f"e{index}", "ENGINE_BACKEND": self.backend}
        if self.backend == "upstream":
            env["ENGINE_UPSTREAM_URL"] = self.upstreams[index]
        if self.backend == "vllm":
            env |= {"ENGINE_MODEL": self.model, "ENGINE_VLLM_ARGS": self.vllm_args}
            if self.tiny_model_dir:
                env["ENGINE_TINY_MODEL_DIR"] = self.tiny_model_dir
        return env


@dataclass(frozen=True)
class Instance:
    """One process to start."""

    name: str  # unique, used for log files and messages: "engine_agent-e0"
    module: str
    env: dict[str, str]
    probe: HealthProbe
    probe_target: str  # bus service name, engine id, or URL
    needs_database: bool = False


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    module: str
    probe: HealthProbe
    per_engine: bool = False  # one instance per engine (ENGINE_ID=e0, e1, ...)
    needs_database: bool = False
    replicas_option: str = ""  # the StackOptions field giving its number of instances (default one)

    def installed(self) -> bool:
        """The module's folder has a `__main__.py` (checked on disk: no service code is imported)."""
        parent, _, leaf = self.module.rpartition(".")
        try:
            spec = importlib.util.find_spec(parent)
        except ModuleNotFoundError:
            return False
        if spec is None or not spec.submodule_search_locations:
            return False
        return any((Path(loc) / leaf / "__main__.py").is_file() for loc in spec.submodule_search_locations)

    def instances(self, opts: StackOptions) -> list[Instance]:
        if self.per_engine:
            return [Instance(f"{self.name}-e{i}", self.module, opts.engine_env(i),
                             HealthProbe.HEARTBEAT, f"e{i}", self.needs_database) for i in range(opts.engines)]
        replicas = getattr(opts, self.replicas_option) if self.replicas_option else 1
        names = [self.name] if replicas == 1 else [f"{self.name}-{i}" for i in range(replicas)]
        if self.probe is HealthProbe.HTTP:
            env = {"API_HOST": opts.host, "API_PORT": str(opts.port)}
            if replicas == 1:
                return [Instance(names[0], self.module, env, self.probe, f"http://{opts.host}:{opts.port}/healthz",
                                 self.needs_database)]
            # every worker binds the one port, where the kernel picks which worker a connection
            # reaches; so each is probed (and scraped) on a port of its own, picked as it starts
            # (with_own_port, shared_port.py)
            return [Instance(name, self.module, env | {"API_REUSE_PORT": "true"}, self.probe,
                             f"http://{opts.host}:{opts.port}/healthz", self.needs_database) for name in names]
        return [Instance(name, self.module, {}, self.probe, self.name, self.needs_database) for name in names]


def with_own_port(inst: Instance, host: str, port: int) -> Instance:
    """One of several API workers, given its own port (API_WORKER_PORT): probed there, since the
    shared port answers for whichever worker the kernel picks."""
    path = inst.probe_target.rsplit("/", 1)[1]  # healthz, or livez in a stack without engines
    return replace(inst, env=inst.env | {"API_WORKER_PORT": str(port)}, probe_target=f"http://{host}:{port}/{path}")


# Start order: state first, then the engines' clients, the engines, and the front door last (it
# opens only when everything behind it answers). Stop order is the reverse.
SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("process_table", "services.process_table", HealthProbe.NATS, needs_database=True),
    ServiceSpec("router", "services.router", HealthProbe.NATS, replicas_option="routers"),
    ServiceSpec("engine_agent", "services.engine_agent", HealthProbe.HEARTBEAT, per_engine=True),
    ServiceSpec("controller", "services.controller", HealthProbe.NATS),
    ServiceSpec("session_api", "services.session_api", HealthProbe.HTTP, replicas_option="api_workers"),
)


def service_names() -> tuple[str, ...]:
    return tuple(spec.name for spec in SERVICES)


def service(name: str) -> ServiceSpec:
    """The row of `name`: where code outside the catalog (benchmarks, tools) finds a service's module."""
    for spec in SERVICES:
        if spec.name == name:
            return spec
    raise ValueError(f"unknown service {name!r}; known: {', '.join(service_names())}")

def plan(opts: StackOptions, services: tuple[ServiceSpec, ...] = SERVICES) -> tuple[list[Instance], list[str]]:
    """The instances to start and the names of the services skipped because they are not installed."""
    if opts.backend not in all_backends():
        raise ValueError(f"--backend must be one of {', '.join(all_backends())}, got {opts.backend!r}")
    if opts.backend == "vllm" and not opts.model:
        raise ValueError("--backend vllm needs --model (a model folder, a hub id, or 'tiny')")
    if opts.backend != "vllm" and (opts.model or opts.vllm_args):
        raise ValueError(f"--model and --vllm-args apply to --backend vllm, not {opts.backend!r}")
    if (opts.backend == "upstream") != bool(opts.upstreams):
        raise ValueError("--upstream URL[,URL...] and --backend upstream go together")
    if opts.backend == "upstream" and opts.engines != len(opts.upstreams):
        raise ValueError(f"--engines is {opts.engines} but {len(opts.upstreams)} upstream URL(s) were given: "
                         "one engine agent per upstream")
    if opts.engines < 1:
        raise ValueError(f"--engines must be >= 1, got {opts.engines}")
    for option, flag in (("api_workers", "--api-workers"), ("routers", "--routers")):
        if not 1 <= getattr(opts, option) <= 64:
            raise ValueError(f"{flag} must be in 1..64, got {getattr(opts, option)}")
    if not 1 <= opts.port <= 65535:
        raise ValueError(f"--port must be in 1..65535, got {opts.port}")
    unknown = set(opts.only) - {s.name for s in services}
    if unknown:
        raise ValueError(f"unknown service(s) {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in services)}")
    instances: list[Instance] = []
    skipped: list[str] = []
    for spec in services:
        if opts.only and spec.name not in opts.only:
            continue
        if spec.installed():
            instances.extend(spec.instances(opts))
        else:
            skipped.append(spec.name)
    if not any(inst.probe is HealthProbe.HEARTBEAT for inst in instances):
        # /healthz is 503 until an engine heartbeats; without engines the API only has to be up
        instances = [replace(inst, probe_target=inst.probe_target.removesuffix("/healthz") + "/livez")
                     if inst.probe is HealthProbe.HTTP else inst for inst in instances]
    return instances, skipped
