"""The cost of tracing, metrics and access logs on `autellix bench mesh`'s full path, side by side.

    python -m loadgen.bench.tracing_cost [--rounds 3] [--seconds 5] [--concurrency 64] [--json PATH]

One `autellix up --engines 1` per variant, all started first and kept up together (the zero-time
lite engine, as `autellix bench mesh` runs it), each driven in turn by the mesh bench's own client
and load (`loadgen.live.mesh_bench`: one-token chat calls, `--concurrency` in flight for `--seconds`)
in rounds, so the load other work puts on a shared machine falls on every variant alike. Each
round starts one variant later (A B C D, B C D A, C D A B, ...) and waits `--settle` seconds
before each window: work a window leaves behind (a traced stack's span export, the table's
completion backlog) then lands after each variant equally often. Each variant's calls/s is also
a ratio to the `off` window of the same round, and each window records the CPU per call of every
process of its stack.

Variants (Prometheus metrics are always counted: the services have no switch for them):
- off: no tracing, no access log (`ACCESS_LOG=false`);
- off_again: a second stack set up as `off`, the control: its ratio to `off` is what the ratios
  read when nothing differs (the noise floor of this host and run, and any bias of a stack's
  place in the order);
- access_log: one JSON access-log line per request (`LOG_LEVEL=info LOG_FORMAT=json`), no tracing;
- traced_all: the access log, and every span exported over OTLP/HTTP to a local sink;
- traced_10pct: the same, sampling 10% of traces (`parentbased_traceidratio`, 0.1).
The sink is a separate process (`loadgen.bench.otlp_sink --count-only`) on the same machine, so
its CPU is paid here as a collector's would be on a host of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from loadgen.bench.cpu import CpuWindow, load_average, stack_role
from loadgen.bench.spread import ratio, summary
from loadgen.live.mesh_bench import LeanHttp, _full_call, _throughput
from loadgen.live.real_servers import report
from loadgen.live.stack_process import start_stack
from runtime.ports import free_port

STACK_ENV = {"TIME_SCALE": "0", "LOG_LEVEL": "warning"}  # as `autellix bench mesh` starts its stack
LOGGED = {"ACCESS_LOG": "true", "LOG_LEVEL": "info", "LOG_FORMAT": "json"}


def variants(sink_url: str) -> dict[str, dict[str, str]]:
    traced = {**LOGGED, "OTEL_EXPORTER_OTLP_ENDPOINT": sink_url}
    return {
        "off": {"ACCESS_LOG": "false"},
        "off_again": {"ACCESS_LOG": "false"},
        "access_log": dict(LOGGED),
        "traced_all": traced,
        "traced_10pct": {**traced, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
        # tracing set up, no trace sampled: what an unsampled call alone costs (not run by default)
        "traced_0pct": {**traced, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
    }


DEFAULT_VARIANTS = ("off", "off_again", "access_log", "traced_all", "traced_10pct")


class Sink:
    """The OTLP sink as a child process: spans are counted, not kept. Its output is read as it
    comes (a thread), so what it writes (its counts, a handler's traceback) never fills the pipe
    and blocks it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "loadgen.bench.otlp_sink", "--port", str(self.port),
                                      "--count-only"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = self.proc.stdout.readline()
        if "otlp sink on" not in first:
            raise RuntimeError(f"the OTLP sink did not start: {first!r}")
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> int | None:
        """Stop it; the spans it received (None if it said nothing). One that does not stop on
        SIGINT within 30 s is killed, and its last count (at most 5 s old) is the one reported."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            print("tracing cost: the OTLP sink did not stop on SIGINT; killed (span count up to 5 s old)",
                  file=sys.stderr, flush=True)
        self._reader.join(timeout=5)
        counts = re.findall(r"spans received: (\d+)", "".join(self.lines))
        return int(counts[-1]) if counts else None


async def _window(stack, http: LeanHttp, seconds: float, concurrency: int, sink_pid: int) -> dict:
    # the sink's CPU is counted in every window (idle outside the traced ones)
    window = CpuWindow(pids={"otlp_sink": sink_pid}, tree_roles={stack.proc.pid: stack_role}).start()
    t0 = time.perf_counter()
    rate = await _throughput(http, seconds, concurrency)
    cpu = window.per_unit_ms(rate * (time.perf_counter() - t0))
    return {"calls_per_s": round(rate, 1), "cpu_ms_per_call": cpu, "load_average_1m": load_average()}


async def run(rounds: int, seconds: float, concurrency: int, settle_s: float = 1.0,
              chosen: tuple[str, ...] = DEFAULT_VARIANTS) -> dict:
    inherited = sorted(k for k in os.environ if k.startswith("OTEL_"))
    if inherited:  # every stack inherits this environment: `off` would be traced
        raise SystemExit(f"unset {', '.join(inherited)} first: each variant sets its own tracing variables")
    sink = Sink()
    stacks: dict = {}
    clients: dict[str, LeanHttp] = {}
    windows: dict[str, list[dict]] = {}
    spans = None
    try:
        for name, env in variants(sink.url).items():
            if name != "off" and name not in chosen:  # off: the base of every ratio
                continue
            print(f"tracing cost: starting {name}", file=sys.stderr, flush=True)
            stacks[name] = await asyncio.to_thread(start_stack, "atlas", 1, free_port(), "lite", 120.0, None,
                                                   {**STACK_ENV, **env})
            clients[name] = await LeanHttp(stacks[name].url, stacks[name].api_key, concurrency).__aenter__()
            windows[name] = []
        for http in clients.values():  # warm every path before the first window
            for _ in range(50):
                await _full_call(http)
            await _throughput(http, 1.0, concurrency)
        load_start = load_average()
        names = list(stacks)
        for i in range(rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                print(f"tracing cost: round {i + 1} of {rounds}, {name}", file=sys.stderr, flush=True)
                await asyncio.sleep(settle_s)
                windows[name].append(await _window(stacks[name], clients[name], seconds, concurrency,
                                                    sink.proc.pid))
        load_end = load_average()
    finally:
        for http in clients.values():
            await http.__aexit__(None, None, None)
        for stack in stacks.values():
            await asyncio.to_thread(stack.stop)
        spans = sink.stop()
    result = _report(windows, rounds, seconds, concurrency, load_start, load_end, spans)
    result["settle_s"] = settle_s
    return result


def _report(windows: dict[str, list[dict]], rounds: int, seconds: float, concurrency: int, load_start: float,
            load_end: float, spans: int | None) -> dict:
    off = [w["calls_per_s"] for w in windows["off"]]
    out = {}
    for name, runs in windows.items():
        rates = [w["calls_per_s"] for w in runs]
        roles = sorted({r for w in runs for r in w["cpu_ms_per_call"]})
        out[name] = {
            "calls_per_s": summary(rates, 1),
            # this variant over `off` in the same round (adjacent windows)
            "of_off": summary([ratio(v, o) for v, o in zip(rates, off, strict=True)]),
            "cpu_ms_per_call": {r: summary([w["cpu_ms_per_call"].get(r) for w in runs]) for r in roles},
            "windows": runs,
        }
    return {"rounds": rounds, "seconds": seconds, "concurrency": concurrency, "variants_first_round": list(windows),
            "variants": out, "spans_received_by_sink": spans, "cpu_count": os.cpu_count(),
            "load_average_1m_start": load_start, "load_average_1m_end": load_end}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.tracing_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="windows per variant, interleaved (A B C D, B C D A, ...)")
    p.add_argument("--seconds", type=float, default=5.0, help="length of each throughput window")
    p.add_argument("--settle", type=float, default=1.0, help="idle seconds before each window")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                   help=f"comma-separated, of {', '.join(variants(''))} (off is always run)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    chosen = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in chosen if v not in variants("")]
    if unknown:
        p.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(variants(''))})")
    result = asyncio.run(run(args.rounds, args.seconds, args.concurrency, args.settle, chosen))
    return report(result, args.json, "python -m loadgen.bench.tracing_cost", argv)


if __name__ == "__main__":
    raise SystemExit(main())
