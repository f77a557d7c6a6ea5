"""Two versions of the mesh side by side in one run, in front of one paced stub upstream: what a
change to the `upstream` path buys, measured against the code before it on the same machine load.

    python -m loadgen.live.mesh_ab --base-tree PATH [--token-gap-ms 3] [--json PATH]

`--base-tree` is a copy of the source tree to compare with (e.g. `git archive HEAD | tar -x -C
PATH`); its `autellix up --upstream` runs from there (its own modules first on the path), the other
from this checkout. The upstream is `loadgen.live.stub_openai` writing one event per `--token-gap-ms`,
as a real engine streams, so per-token relay costs count (the unpaced stub writes a stream at once).
Each repeat sends `--calls` sequential streamed calls per side, interleaved (direct, base, new, in
rotating order), then `--rounds` rounds of `--concurrency` calls at once per side, alternating
sides round by round; CPU per call of each mesh service is read around each round. Added latency =
a side's percentile minus the direct call's in the same repeat; `new / base` ratios per repeat,
then min / median / max and the spread over repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen.bench import servers
from loadgen.bench.cpu import cpu_s, load_average, stack_role
from loadgen.bench.spread import ratio, summarize_runs
from loadgen.live.peer_bench import Client
from loadgen.live.real_servers import API_KEY, REPO_ROOT, stop, wait_ready
from loadgen.results_json import write_json
from shared.stats import percentile

SIDES = ("direct", "base", "new")


class AbSides:
    """The paced stub and one mesh per source tree in front of it, as child processes."""

    def __init__(self, state: Path, base_tree: Path, token_gap_ms: float,
                 side_env: dict[str, dict[str, str]] | None = None) -> None:
        self.state, self.base_tree, self.token_gap_ms = state, base_tree, token_gap_ms
        self.side_env = side_env or {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.urls: dict[str, str] = {}

    def start(self, startup_s: float) -> AbSides:
        from shared.engine.tiny_model import make_tiny_model

        deadline = time.monotonic() + startup_s
        model_dir = make_tiny_model(self.state / "tiny-model")
        env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
        env |= {"AUTELLIX_API_KEYS": f"bench:{API_KEY}", "HF_HUB_OFFLINE": "1", "LOG_LEVEL": "warning"}
        self.urls = {"direct": f"http://127.0.0.1:{servers.free_port()}"}
        self.procs["direct"] = servers.start_module(
            "loadgen.live.stub_openai", "--port", self.urls["direct"].rsplit(":", 1)[1], "--model", "tiny",
            "--root", str(model_dir), "--token-gap-ms", str(self.token_gap_ms))
        wait_ready(self.urls["direct"], self.procs["direct"], deadline, self.state)
        # one mesh after the other, each port picked just before its stack starts: a stack picks
        # free ports for its services as it comes up, and could take one reserved for the other's API
        for side, tree in (("base", self.base_tree), ("new", REPO_ROOT)):
            self.urls[side] = f"http://127.0.0.1:{servers.free_port()}"
            # `python -m` puts the working folder first on the path: each mesh runs its own tree's code
            self.procs[side] = subprocess.Popen(
                [sys.executable, "-m", "autellix", "up", "--upstream", self.urls["direct"], "--state-dir",
                 str(self.state / side), "--port", self.urls[side].rsplit(":", 1)[1], "--nats-port", "0",
                 "--startup-timeout", str(int(startup_s))],
                cwd=tree, env=env | self.side_env.get(side, {}), stdout=open(self.state / f"{side}.log", "w"), stderr=subprocess.STDOUT)
            wait_ready(self.urls[side], self.procs[side], deadline, self.state)
        return self

    def stop(self) -> None:
        for side in ("new", "base", "direct"):
            stop(self.procs.get(side))

    def cpu(self, side: str) -> dict[str, float]:
        if side == "direct":
            return cpu_s({"upstream": self.procs["direct"].pid})
        return cpu_s({}, {self.procs[side].pid: stack_role})


def _ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1e3


def _latency(pairs: list[tuple[float, float]]) -> dict[str, float]:
    e2e, ttft = [p[0] for p in pairs], [p[1] for p in pairs]
    return {"e2e_p50_ms": _ms(e2e, 50), "e2e_p99_ms": _ms(e2e, 99), "ttft_p50_ms": _ms(ttft, 50),
            "ttft_p99_ms": _ms(ttft, 99)}


async def _repeat(client: Client, sides: AbSides, index: int, calls: int, rounds: int, concurrency: int) -> dict:
    sequential: dict[str, list] = {side: [] for side in SIDES}
    for i in range(calls):
        shift = (i + index) % len(SIDES)
        for side in SIDES[shift:] + SIDES[:shift]:
            sequential[side].append(await client.call(side))
    concurrent: dict[str, list] = {side: [] for side in SIDES}
    cpu_used: dict[str, dict[str, float]] = {side: {} for side in SIDES}
    for r in range(rounds):
        shift = (r + index) % len(SIDES)
        for side in SIDES[shift:] + SIDES[:shift]:
            before = sides.cpu(side)
            concurrent[side] += await asyncio.gather(*(client.call(side) for _ in range(concurrency)))
            after = sides.cpu(side)
            for role, seconds in after.items():
                cpu_used[side][role] = cpu_used[side].get(role, 0.0) + seconds - before.get(role, 0.0)
    out: dict = {"cpu_ms_per_call": {}}
    for label, samples in (("one_stream", sequential), (f"{concurrency}_streams", concurrent)):
        latency = {side: _latency(samples[side]) for side in SIDES}
        added = {side: {k.replace("_ms", "_added_ms"): v - latency["direct"][k] for k, v in latency[side].items()}
                 for side in ("base", "new")}
        out[label] = {"latency_ms": latency, "added_ms": added,
                      "new_over_base_added": {k: ratio(added["new"][k], added["base"][k]) for k in added["new"]}}
    n = rounds * concurrency
    for side in ("base", "new"):
        per_call = {role: s / n * 1e3 for role, s in sorted(cpu_used[side].items())}
        out["cpu_ms_per_call"][side] = per_call | {"mesh_total": sum(per_call.values())}
    base_total, new_total = out["cpu_ms_per_call"]["base"]["mesh_total"], out["cpu_ms_per_call"]["new"]["mesh_total"]
    out["cpu_ms_per_call"]["new_over_base"] = ratio(new_total, base_total)
    return out


async def measure(sides: AbSides, repeats: int, calls: int, rounds: int, concurrency: int, max_tokens: int) -> dict:
    runs = []
    async with Client(sides.urls, concurrency, max_tokens) as client:
        for side in SIDES:  # warm-up: connections, the meshes' tokenizers
            for _ in range(5):
                await client.call(side)
        for i in range(repeats):
            print(f"mesh a/b: repeat {i + 1} of {repeats}", file=sys.stderr, flush=True)
            runs.append(await _repeat(client, sides, i, calls, rounds, concurrency))
    return {"summary": summarize_runs(runs), "runs": runs}


def _assignment(p: argparse.ArgumentParser, text: str) -> tuple[str, str]:
    name, eq, value = text.partition("=")
    if not eq or not name:
        p.error(f"expected NAME=VALUE, got {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.mesh_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-tree", type=Path, required=True, help="source tree of the mesh to compare with")
    p.add_argument("--token-gap-ms", type=float, default=3.0, help="the stub's time between events")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--calls", type=int, default=40, help="sequential calls per side per repeat")
    p.add_argument("--rounds", type=int, default=10, help="rounds of --concurrency calls per side per repeat")
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--startup-timeout", type=float, default=300.0)
    p.add_argument("--base-env", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for the base mesh only (what one setting costs, same tree twice)")
    p.add_argument("--new-env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    side_env = {side: dict(_assignment(p, a) for a in given) for side, given in
                (("base", args.base_env), ("new", args.new_env))}
    if not (args.base_tree / "services" / "session_api").is_dir():
        p.error(f"--base-tree {args.base_tree} is not a source tree of this project (no services/session_api)")
    state = Path(tempfile.mkdtemp(prefix="autellix-ab-", dir="/tmp"))
    sides = AbSides(state, args.base_tree.resolve(), args.token_gap_ms, side_env)
    load_start = load_average()
    try:
        sides.start(args.startup_timeout)
        result = asyncio.run(measure(sides, args.repeats, args.calls, args.rounds, args.concurrency,
                                     args.max_tokens))
    except BaseException:
        for log in sorted(state.glob("*.log")):
            print(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]), file=sys.stderr)
        raise
    finally:
        sides.stop()
        shutil.rmtree(state, ignore_errors=True)
    result = {"benchmark": "the upstream path, base tree vs this checkout, same paced stub, same run",
              "command": "python -m loadgen.live.mesh_ab " + " ".join(argv if argv is not None else sys.argv[1:]),
              "side_env": side_env, "token_gap_ms": args.token_gap_ms, "max_tokens": args.max_tokens, "calls": args.calls,
              "rounds": args.rounds, "concurrency": args.concurrency, "repeats": args.repeats,
              "cpu_count": os.cpu_count(), "load_average_1m": [load_start, load_average()], **result}
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
