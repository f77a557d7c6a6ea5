"""Mesh overhead over the same real engine called directly, side by side in one run.

`python -m loadgen.live.real_overhead --json PATH` starts `autellix up --backend vllm --model tiny
--engines 1` and, beside it, vLLM's own OpenAI server on the same tiny model (same flags, same
random weights). With `--path upstream` the mesh instead fronts that very server (`autellix up
--upstream URL`), so both sides reach one engine. It then alternates rounds of `--concurrency` concurrent streaming calls between the
two (greedy, `ignore_eos`, the same prompt and length, so both do the same work), and finally sends
a long prompt (`--long-chars` characters) to each. Reports end-to-end and first-token latency
percentiles for both and the differences (mesh minus direct). Both servers share this machine's
cores, so they are measured in turns, never at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from loadgen.live.real_servers import API_KEY, REPO_ROOT, free_port, stop, wait_ready
from loadgen.results_json import write_json
from shared.stats import percentile


def start_direct(state: Path, env: dict[str, str], deadline: float | None = None) -> tuple[subprocess.Popen, str]:
    """vLLM's own OpenAI server on the tiny model (made in `state`), as the mesh's engines run it;
    once it answers when `deadline` (monotonic) is given."""
    from services.engine_agent.vllm_main import TINY_MODEL_VLLM_ARGS
    from shared.engine.tiny_model import make_tiny_model

    model_dir = make_tiny_model(state / "tiny-model")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    direct = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
                               "--served-model-name", "tiny", "--port", str(port), "--host", "127.0.0.1",
                               "--scheduling-policy", "priority", *TINY_MODEL_VLLM_ARGS],
                              cwd=state, env=env, stdout=open(state / "direct.log", "w"), stderr=subprocess.STDOUT)
    if deadline is not None:
        wait_ready(url, direct, deadline, state)
    return direct, url


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    return env | {"AUTELLIX_API_KEYS": f"bench:{API_KEY}", "HF_HUB_OFFLINE": "1"}


def start_servers(state: Path, startup_s: float = 400.0,
                  path: str = "vllm") -> tuple[subprocess.Popen, str, subprocess.Popen, str]:
    """(mesh process, its URL, direct process, its URL) once both answer."""
    env = server_env()
    deadline = time.monotonic() + startup_s
    # the mesh needs its upstream's /v1/models
    direct, direct_url = start_direct(state, env, deadline if path == "upstream" else None)
    mesh_port = free_port()
    mesh_url = f"http://127.0.0.1:{mesh_port}"
    engine = ["--upstream", direct_url] if path == "upstream" else ["--backend", "vllm", "--model", "tiny", "--engines", "1"]
    mesh = subprocess.Popen([sys.executable, "-m", "autellix", "up", *engine, "--state-dir", str(state),
                             "--port", str(mesh_port), "--nats-port", "0", "--startup-timeout", str(startup_s)],
                            cwd=REPO_ROOT, env=env, stdout=open(state / "up.log", "w"), stderr=subprocess.STDOUT)
    for url, proc in ((direct_url, direct), (mesh_url, mesh)):
        wait_ready(url, proc, deadline, state)
    return mesh, mesh_url, direct, direct_url


async def _stream_call(http: httpx.AsyncClient, url: str, prompt: str, max_tokens: int) -> tuple[float, float]:
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True}
    t0 = time.perf_counter()
    first = None
    async with http.stream("POST", f"{url}/v1/chat/completions", json=body,
                           headers={"Authorization": f"Bearer {API_KEY}"}) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if first is None and line.startswith("data: ") and '"content":"' in line and '"content":""' not in line:
                first = time.perf_counter()
    end = time.perf_counter()
    return end - t0, (first or end) - t0


async def _round(http, url: str, concurrency: int, max_tokens: int, rng: random.Random) -> list[tuple[float, float]]:
    prompts = [f"step {rng.randrange(10**9)} plan the next step" for _ in range(concurrency)]
    return await asyncio.gather(*(_stream_call(http, url, p, max_tokens) for p in prompts))


async def _long(http, url: str, chars: int, seed: int) -> tuple[float, int]:
    """A `chars`-character prompt; a new text per `seed`, so neither engine has it cached."""
    words = "the quick brown fox jumps over the lazy dog plan the next step read the file run the tests".split()
    rng = random.Random(seed)
    text = " ".join(rng.choice(words) for _ in range(chars // 3))[:chars]
    t0 = time.perf_counter()
    resp = await http.post(f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {API_KEY}"},
                           json={"model": "tiny", "messages": [{"role": "user", "content": text}], "max_tokens": 8,
                                 "temperature": 0, "ignore_eos": True}, timeout=600)
    resp.raise_for_status()
    return time.perf_counter() - t0, resp.json()["usage"]["prompt_tokens"]


def _summary(samples: list[float]) -> dict:
    return {"p50_ms": round(percentile(samples, 50) * 1e3, 2), "p99_ms": round(percentile(samples, 99) * 1e3, 2),
            "mean_ms": round(statistics.fmean(samples) * 1e3, 2), "n": len(samples)}


def _cpu_by_process(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of a process and its descendants, by process name."""
    import psutil

    out: dict[str, float] = {}
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return out
    for proc in procs:
        try:
            cmd = proc.cmdline()
            name = next((a for a in cmd if a.startswith(("services.", "vllm.entrypoints"))), proc.name())
            t = proc.cpu_times()
            out[name] = out.get(name, 0.0) + t.user + t.system
        except psutil.Error:
            continue
    return out


async def measure(mesh_url: str, direct_url: str, rounds: int, concurrency: int, max_tokens: int,
                  long_chars: int, long_runs: int, pids: dict[str, int] | None = None) -> dict:
    rng = random.Random(0)
    results = {"mesh": {"e2e": [], "ttft": []}, "direct": {"e2e": [], "ttft": []}}
    limits = httpx.Limits(max_connections=concurrency * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        for url in (direct_url, mesh_url):  # warm-up: a round each, discarded
            await _round(http, url, concurrency, max_tokens, rng)
        cpu_before = {name: _cpu_by_process(pid) for name, pid in (pids or {}).items()}
        for i in range(rounds):
            order = [("direct", direct_url), ("mesh", mesh_url)]
            if i % 2:
                order.reverse()
            for name, url in order:
                for e2e, ttft in await _round(http, url, concurrency, max_tokens, rng):
                    results[name]["e2e"].append(e2e)
                    results[name]["ttft"].append(ttft)
        cpu_after = {name: _cpu_by_process(pid) for name, pid in (pids or {}).items()}
        long = {"mesh": [], "direct": []}
        prompt_tokens = 0
        for i in range(long_runs if long_chars else 0):
            for name, url in ((("direct", direct_url), ("mesh", mesh_url)) if i % 2 == 0
                              else (("mesh", mesh_url), ("direct", direct_url))):
                seconds, prompt_tokens = await _long(http, url, long_chars, seed=i)
                long[name].append(seconds)
    out = {name: {k: _summary(v) for k, v in r.items()} for name, r in results.items()}
    added = {f"{k}_{q}": round(out["mesh"][k][f"{q}_ms"] - out["direct"][k][f"{q}_ms"], 2)
             for k in ("e2e", "ttft") for q in ("p50", "p99")}
    # CPU per call of each side's processes over the whole alternating run (each side also idles
    # through the other's rounds; vLLM's engine loop costs CPU while idle too)
    num_calls = rounds * concurrency
    cpu = {name: {proc: round((cpu_after[name].get(proc, 0.0) - t) / num_calls * 1e3, 2)
                  for proc, t in before.items()} for name, before in cpu_before.items()}
    result = {"calls": out, "added_ms": added, "cpu_ms_per_call": cpu}
    if not long_chars:
        return result
    return {**result,
            "long_prompt": {"chars": long_chars, "prompt_tokens": prompt_tokens,
                            "mesh": _summary(long["mesh"]), "direct": _summary(long["direct"]),
                            "added_p50_ms": round((percentile(long["mesh"], 50) - percentile(long["direct"], 50)) * 1e3, 1)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.real_overhead", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--concurrency", default="1,10", help="concurrent streams per round (comma list: each measured)")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--long-chars", type=int, default=100_000)
    p.add_argument("--long-runs", type=int, default=3)
    p.add_argument("--path", choices=("vllm", "upstream"), default="vllm",
                   help="the mesh's engine: its own (backend vllm), or the direct server itself (backend upstream)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="autellix-overhead-", dir="/tmp"))
    mesh = direct = None
    try:
        mesh, mesh_url, direct, direct_url = start_servers(state, path=args.path)
        levels = [int(c) for c in args.concurrency.split(",")]
        pids = {"mesh": mesh.pid, "direct": direct.pid}
        result = {"by_concurrency": {str(c): asyncio.run(measure(
            mesh_url, direct_url, args.rounds, c, args.max_tokens, args.long_chars if c == levels[-1] else 0,
            args.long_runs, pids)) for c in levels}}
    finally:
        for proc in (mesh, direct):
            stop(proc)
        shutil.rmtree(state, ignore_errors=True)
    result = {"benchmark": "mesh over a direct call of the same real vLLM engine (tiny model, CPU)",
              "path": args.path,
              "command": "python -m loadgen.live.real_overhead " + " ".join(argv or sys.argv[1:]),
              "rounds": args.rounds, "max_tokens": args.max_tokens, **result}
    print(json.dumps(result, indent=2))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
