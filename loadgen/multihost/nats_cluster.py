"""A NATS cluster with JetStream, one node per host: the same role users and permissions as every
embedded server (`runtime/nats_auth.py`), plus the cluster's routes and a server name.

The nodes share one credentials file (each role has one password mesh-wide). Pings every
`ping_interval_s`, `ping_max` unanswered: a peer behind a cut link is dropped within a few
seconds instead of the server default's minutes (clients and routes alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadgen.multihost.netns import Host
from runtime.nats_auth import NatsCredentials, render_config, write_private
from runtime.nats_server import nats_server_binary
from runtime.processes import ManagedProcess

CLIENT_PORT = 4222
ROUTE_PORT = 6222
CLUSTER_NAME = "autellix"


@dataclass(frozen=True)
class ClusterTuning:
    ping_interval_s: float = 1.0
    ping_max: int = 3


def node_config(host: Host, peers: list[Host], store_dir: Path, credentials: NatsCredentials,
                tuning: ClusterTuning) -> str:
    routes = ", ".join(f'"nats-route://{p.address}:{ROUTE_PORT}"' for p in peers if p.name != host.name)
    return (render_config(credentials)
            + f'server_name: "{host.name}"\n'
            + f'listen: "{host.address}:{CLIENT_PORT}"\n'
            + f'ping_interval: "{tuning.ping_interval_s:g}s"\nping_max: {tuning.ping_max}\n'
            + f'jetstream {{ store_dir: "{store_dir}" }}\n'
            + f'cluster {{\n  name: "{CLUSTER_NAME}"\n  listen: "{host.address}:{ROUTE_PORT}"\n'
            + f"  routes: [{routes}]\n}}\n")


def start_node(host: Host, peers: list[Host], root: Path, credentials: NatsCredentials,
               tuning: ClusterTuning) -> ManagedProcess:
    store = root / host.name
    store.mkdir(parents=True, exist_ok=True)
    config = store / "nats.conf"
    write_private(config, node_config(host, peers, store / "js", credentials, tuning))
    argv = host.argv([str(nats_server_binary()), "-c", str(config)])
    return ManagedProcess(f"nats-{host.name}", argv, {}, root / "logs" / f"nats-{host.name}.log").start()


def client_url(hosts: list[Host], credentials: NatsCredentials, role: str) -> str:
    """Every node's address with the role's credentials, comma-separated (NATS_URL)."""
    return ",".join(credentials.url(f"nats://{h.address}:{CLIENT_PORT}", role) for h in hosts)
