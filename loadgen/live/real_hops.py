"""Where the mesh's added latency over a real vLLM engine goes: per-hop times, CPU and run-queue
waits per process, CPU placement and the upstream's /metrics reads, each side by side in one run.

    python -m loadgen.live.real_hops --path upstream|vllm --experiments hops,sched,placement,scrape --json PATH

The servers are those of `loadgen.live.real_overhead` (the mesh and vLLM's own OpenAI server on the
tiny model). Experiments, each alternating its arms block by block:
- `hops`: the mesh's processes run with `loadgen/live/hop_marks` on their path, which timestamps
  a call at each hop (API, router, engine agent, engine answer, bus); medians per mark, in ms after
  the client sent the request, beside the direct call's first byte, first token and end.
- `sched`: mesh-only and direct-only blocks; per process, CPU, run-queue wait (time runnable but
  not running, /proc/<pid>/task/*/schedstat) and time slices per call.
- `placement`: the mesh's processes (and, in the third arm, vLLM's server and engine core too)
  on every core, or on the cores the vLLM CPU worker's OpenMP thread is not bound to.
- `scrape` (path upstream): the mesh stopped (SIGSTOP); direct calls while an outside reader GETs
  the server's /metrics every 0.5 s, every 2 s, or never: latency, and vLLM's server CPU per
  second with those calls and with none.
- `body` (path upstream): direct calls with the client's body, or with the body as the engine
  agent sends it upstream (priority, session_id, request_id, usage asked for, a cache salt).
The marks of `hops` (and its loop watch, a wake-up every 10 ms in the engine agent) stay on for the
rest of that run: run `hops` alone for the other experiments' figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from loadgen.live.process_cpu import cpu_s_by_name, process_name
from loadgen.live.real_overhead import _round, _summary, start_servers
from loadgen.live.real_servers import API_KEY, REPO_ROOT, stop
from loadgen.results_json import write_json
from runtime.cpu_placement import pin_tree, tree, worker_cpus
from shared.stats import percentile

MARKS = REPO_ROOT / "loadgen" / "live" / "hop_marks"


def _schedstat(root_pid: int) -> dict[str, list[int]]:
    """Per process name: [CPU ns, run-queue wait ns, time slices], over all its threads."""
    out: dict[str, list[int]] = {}
    for proc in tree(root_pid):
        try:
            name = process_name(proc)
            for tid in os.listdir(f"/proc/{proc.pid}/task"):
                with open(f"/proc/{proc.pid}/task/{tid}/schedstat") as f:
                    values = [int(v) for v in f.read().split()]
                acc = out.setdefault(name, [0, 0, 0])
                for i in range(3):
                    acc[i] += values[i]
        except (psutil.Error, OSError, ValueError):
            continue
    return out


def _signal(root_pid: int, sig: int) -> None:
    for proc in tree(root_pid):
        try:
            proc.send_signal(sig)
        except psutil.Error:
            continue


async def _timed_call(http: httpx.AsyncClient, url: str, prompt: str, max_tokens: int) -> dict:
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True}
    t0 = time.time_ns()
    call = {"t0": t0, "id": "", "first": 0}
    async with http.stream("POST", f"{url}/v1/chat/completions", json=body,
                           headers={"Authorization": f"Bearer {API_KEY}"}) as resp:
        call["headers"] = time.time_ns()
        async for line in resp.aiter_lines():
            if not call["id"] and line.startswith("data: {"):
                call["id"] = json.loads(line[6:])["id"]
            if not call["first"] and '"content":"' in line and '"content":""' not in line:
                call["first"] = time.time_ns()
    call["end"] = time.time_ns()
    return call


async def hops(urls: dict, marks_dir: Path, rounds: int, concurrency: int, max_tokens: int) -> dict:
    rng = random.Random(1)
    calls: dict[str, list[dict]] = {"direct": [], "mesh": []}
    failed = {"direct": 0, "mesh": 0}
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency * 2)) as http:
        for i in range(rounds + 1):
            for side in (("direct", "mesh") if i % 2 else ("mesh", "direct")):
                done = await asyncio.gather(*(_timed_call(http, urls[side], f"step {rng.randrange(10**9)} plan",
                                                          max_tokens) for _ in range(concurrency)),
                                            return_exceptions=True)
                failed[side] += sum(isinstance(d, Exception) for d in done)  # counted, never hidden
                if i:  # round 0 warms up
                    calls[side] += [d for d in done if not isinstance(d, Exception)]
    marks: dict[str, dict[str, int]] = {}
    lates = []
    for path in marks_dir.glob("*.log"):
        for line in path.read_text().splitlines():
            t, key, name = line.split()
            if key == "loop":
                lates.append(int(t))
            marks.setdefault(key, {}).setdefault(name, int(t))
    after: dict[str, list[float]] = {}
    for call in calls["mesh"]:
        seen = marks.get(call["id"].split("-", 1)[-1], {})
        for name, t in [*seen.items(), *((k, call[k]) for k in ("headers", "first", "end"))]:
            after.setdefault(name if name in seen else f"client_{name}", []).append((t - call["t0"]) / 1e6)
    direct = {k: [(c[k] - c["t0"]) / 1e6 for c in calls["direct"]] for k in ("headers", "first", "end")}
    table = {name: {"p50_ms": round(percentile(v, 50), 2), "p90_ms": round(percentile(v, 90), 2), "n": len(v)}
             for name, v in sorted(after.items(), key=lambda kv: percentile(kv[1], 50)) if len(v) >= len(calls["mesh"]) // 2}
    return {"concurrency": concurrency, "mesh_marks_ms_after_send": table,
            "direct_client_ms_after_send": {k: {"p50_ms": round(percentile(v, 50), 2),
                                                "p90_ms": round(percentile(v, 90), 2)} for k, v in direct.items()},
            "engine_agent_loop_woke_late": len(lates), "failed_calls": failed}


async def sched(urls: dict, pids: dict, rounds: int, concurrency: int, max_tokens: int, blocks: int) -> dict:
    rng = random.Random(2)
    acc: dict[str, dict] = {side: {"calls": 0, "wall_s": 0.0, "procs": {}} for side in ("direct", "mesh")}
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency * 2)) as http:
        for side in ("direct", "mesh"):
            await _round(http, urls[side], concurrency, max_tokens, rng)
        for b in range(blocks):
            for side in (("direct", "mesh") if b % 2 == 0 else ("mesh", "direct")):
                before = {k: _schedstat(p) for k, p in pids.items()}
                t0 = time.perf_counter()
                for _ in range(rounds):
                    await _round(http, urls[side], concurrency, max_tokens, rng)
                acc[side]["wall_s"] += time.perf_counter() - t0
                acc[side]["calls"] += rounds * concurrency
                for k, p in pids.items():
                    for name, now in _schedstat(p).items():
                        was = before[k].get(name, [0, 0, 0])
                        total = acc[side]["procs"].setdefault(name, [0, 0, 0])
                        for i in range(3):
                            total[i] += now[i] - was[i]
    out = {}
    for side, a in acc.items():
        n = a["calls"]
        out[side] = {"wall_ms_per_round": round(a["wall_s"] / (n / concurrency) * 1e3, 1), "per_call": {
            name: {"cpu_ms": round(v[0] / n / 1e6, 2), "runqueue_wait_ms": round(v[1] / n / 1e6, 2),
                   "slices": round(v[2] / n, 1)} for name, v in sorted(a["procs"].items()) if v[0] or v[1]}}
    return {"concurrency": concurrency, "blocks": blocks, "rounds_per_block": rounds, **out}


async def placement(urls: dict, pids: dict, rounds: int, concurrency: int, max_tokens: int, blocks: int) -> dict:
    every = set(range(os.cpu_count() or 1))
    free = every - worker_cpus(pids["direct"]) or every
    arms = {"all_float": (every, every), "mesh_off_worker_core": (free, every), "both_off_worker_core": (free, free)}
    rng = random.Random(3)
    res = {arm: {"mesh": ([], []), "direct": ([], [])} for arm in arms}
    by_block: dict[str, list[float]] = {arm: [] for arm in arms}  # added e2e p50 of each block
    try:
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency * 2)) as http:
            for side in ("direct", "mesh"):
                await _round(http, urls[side], concurrency, max_tokens, rng)
            for b in range(blocks):
                for arm in (list(arms) if b % 2 == 0 else list(arms)[::-1]):
                    pin_tree(pids["mesh"], arms[arm][0])
                    pin_tree(pids["direct"], arms[arm][1])
                    block: dict[str, list[float]] = {"mesh": [], "direct": []}
                    for i in range(rounds):
                        for side in (("direct", "mesh") if i % 2 == 0 else ("mesh", "direct")):
                            for e2e, ttft in await _round(http, urls[side], concurrency, max_tokens, rng):
                                res[arm][side][0].append(e2e)
                                res[arm][side][1].append(ttft)
                                block[side].append(e2e)
                    by_block[arm].append(round((percentile(block["mesh"], 50) - percentile(block["direct"], 50)) * 1e3, 1))
    finally:
        pin_tree(pids["mesh"], every)
        pin_tree(pids["direct"], every)
    out = {}
    for arm, r in res.items():
        lat = {side: {"e2e": _summary(e), "ttft": _summary(t)} for side, (e, t) in r.items()}
        lat["added_ms"] = {f"{k}_{q}": round(lat["mesh"][k][f"{q}_ms"] - lat["direct"][k][f"{q}_ms"], 2)
                           for k in ("e2e", "ttft") for q in ("p50", "p99")}
        lat["added_e2e_p50_ms_by_block"] = by_block[arm]
        out[arm] = lat
    return {"concurrency": concurrency, "blocks": blocks, "rounds_per_block": rounds,
            "mesh_cpus": {a: sorted(c[0]) for a, c in arms.items()}, "arms": out}


async def _reader(http: httpx.AsyncClient, url: str, every_s: float) -> None:
    while True:
        await http.get(f"{url}/metrics")
        await asyncio.sleep(every_s)


async def scrape(urls: dict, pids: dict, rounds: int, concurrency: int, max_tokens: int, blocks: int) -> dict:
    arms = {"no_reads": None, "reads_every_2s": 2.0, "reads_every_0.5s": 0.5}
    rng = random.Random(4)
    res = {arm: {"e2e": [], "ttft": [], "cpu_s": 0.0, "wall_s": 0.0} for arm in arms}
    _signal(pids["mesh"], signal.SIGSTOP)
    try:
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency * 2 + 2)) as http:
            await _round(http, urls["direct"], concurrency, max_tokens, rng)
            for b in range(blocks):
                for arm in (list(arms) if b % 2 == 0 else list(arms)[::-1]):
                    reader = arms[arm] and asyncio.create_task(_reader(http, urls["direct"], arms[arm]))
                    before, t0 = cpu_s_by_name((pids["direct"],)), time.perf_counter()
                    for _ in range(rounds):
                        for e2e, ttft in await _round(http, urls["direct"], concurrency, max_tokens, rng):
                            res[arm]["e2e"].append(e2e)
                            res[arm]["ttft"].append(ttft)
                    res[arm]["wall_s"] += time.perf_counter() - t0
                    res[arm]["cpu_s"] += cpu_s_by_name((pids["direct"],)).get("vllm.entrypoints.openai.api_server", 0.0) - \
                        before.get("vllm.entrypoints.openai.api_server", 0.0)
                    if reader:
                        reader.cancel()
    finally:
        _signal(pids["mesh"], signal.SIGCONT)
    idle = await _idle_cpu(urls, pids, arms, blocks)
    return {"concurrency": concurrency, "blocks": blocks, "rounds_per_block": rounds, "arms": {
        arm: {"e2e": _summary(r["e2e"]), "ttft": _summary(r["ttft"]),
              "vllm_server_cpu_ms_per_s_with_calls": round(r["cpu_s"] / r["wall_s"] * 1e3, 1),
              "vllm_server_cpu_ms_per_s_idle": idle[arm]} for arm, r in res.items()}}


async def _idle_cpu(urls: dict, pids: dict, arms: dict, blocks: int, seconds: float = 4.0) -> dict[str, float]:
    """vLLM's server CPU per second with no calls, per reading interval (the mesh stopped)."""
    name = "vllm.entrypoints.openai.api_server"
    used = dict.fromkeys(arms, 0.0)
    _signal(pids["mesh"], signal.SIGSTOP)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            for b in range(blocks):
                for arm in (list(arms) if b % 2 == 0 else list(arms)[::-1]):
                    reader = arms[arm] and asyncio.create_task(_reader(http, urls["direct"], arms[arm]))
                    before = cpu_s_by_name((pids["direct"],)).get(name, 0.0)
                    await asyncio.sleep(seconds)
                    used[arm] += cpu_s_by_name((pids["direct"],)).get(name, 0.0) - before
                    if reader:
                        reader.cancel()
    finally:
        _signal(pids["mesh"], signal.SIGCONT)
    return {arm: round(s / (blocks * seconds) * 1e3, 1) for arm, s in used.items()}


async def body(urls: dict, pids: dict, rounds: int, concurrency: int, max_tokens: int, blocks: int) -> dict:
    """Direct calls: the client's body as sent, or as the upstream agent sends it (priority,
    session_id, request_id, usage asked for, a cache salt): is vLLM slower for the mesh's request?"""
    import uuid

    rng = random.Random(5)
    res: dict[str, tuple[list, list]] = {"as_sent": ([], []), "as_the_agent_sends_it": ([], [])}

    async def one(http, mesh_shaped: bool) -> tuple[float, float]:
        req = {"model": "tiny", "messages": [{"role": "user", "content": f"step {rng.randrange(10**9)} plan"}],
               "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}
        if mesh_shaped:
            req |= {"priority": 1, "session_id": uuid.uuid4().hex, "request_id": uuid.uuid4().hex,
                    "stream_options": {"include_usage": True}, "cache_salt": "0123456789abcdef"}
        t0, first = time.perf_counter(), None
        async with http.stream("POST", f"{urls['direct']}/v1/chat/completions", json=req) as resp:
            async for line in resp.aiter_lines():
                if first is None and '"content":"' in line and '"content":""' not in line:
                    first = time.perf_counter()
        end = time.perf_counter()
        return end - t0, (first or end) - t0
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency * 2)) as http:
        for i in range(blocks * rounds):
            for arm in (list(res) if i % 2 == 0 else list(res)[::-1]):
                for e2e, ttft in await asyncio.gather(*(one(http, arm != "as_sent") for _ in range(concurrency))):
                    res[arm][0].append(e2e)
                    res[arm][1].append(ttft)
    return {"concurrency": concurrency, "arms": {arm: {"e2e": _summary(e), "ttft": _summary(t)}
                                                 for arm, (e, t) in res.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.real_hops", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--path", choices=("vllm", "upstream"), default="upstream")
    p.add_argument("--experiments", default="hops,sched,placement,scrape,body")
    p.add_argument("--concurrency", default="1,10")
    p.add_argument("--rounds", type=int, default=3, help="rounds per block (hops: rounds in all)")
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--lag-ms", type=float, default=15.0, help="hops: note engine-agent loop wake-ups this late")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    wanted = args.experiments.split(",")
    unknown = set(wanted) - {"hops", "sched", "placement", "scrape", "body"}
    if unknown:
        p.error(f"unknown experiments {sorted(unknown)}")
    state = Path(tempfile.mkdtemp(prefix="autellix-hops-", dir="/tmp"))
    marks_dir = state / "marks"
    marks_dir.mkdir()
    if "hops" in wanted:  # the mesh's processes (and vLLM's server, which imports none of the targets)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(MARKS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        os.environ |= {"HOP_MARKS_DIR": str(marks_dir), "HOP_MARKS_LAG_MS": str(args.lag_ms)}
    mesh = direct = None
    result: dict = {"benchmark": "where the mesh's added latency over a real vLLM engine goes", "path": args.path,
                    "command": "python -m loadgen.live.real_hops " + " ".join(argv or sys.argv[1:]),
                    "load_average_at_start": os.getloadavg()}
    try:
        mesh, mesh_url, direct, direct_url = start_servers(state, path=args.path)
        urls, pids = {"mesh": mesh_url, "direct": direct_url}, {"mesh": mesh.pid, "direct": direct.pid}
        for c in (int(x) for x in args.concurrency.split(",")):
            runs = result.setdefault(str(c), {})
            if "hops" in wanted:
                for f in marks_dir.glob("*.log"):
                    f.write_text("")
                runs["hops"] = asyncio.run(hops(urls, marks_dir, args.rounds * args.blocks, c, args.max_tokens))
            for name, fn in (("sched", sched), ("placement", placement), ("scrape", scrape), ("body", body)):
                if name in wanted and not (name in ("scrape", "body") and args.path != "upstream"):
                    runs[name] = asyncio.run(fn(urls, pids, args.rounds, c, args.max_tokens, args.blocks))
                    print(json.dumps({name: runs[name]})[:2000], file=sys.stderr, flush=True)
    finally:
        for proc in (mesh, direct):
            stop(proc)
        shutil.rmtree(state, ignore_errors=True)
    result["load_average_at_end"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
