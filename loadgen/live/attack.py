"""Priority gaming against a running stack, measured: can a client reset what it is charged?

    python -m loadgen.live.attack --json docs/results/attack_fair_share.json     # starts `autellix up` (lite)
    python -m loadgen.live.attack --no-fair-share --json docs/results/attack_no_fair_share.json

1. Charging: the same work (N sequential calls of the same size) sent honestly (one session, one
   thread) and by an attacker's strategies: a fresh parentless `X-Thread-Id` per call, a fresh
   session per call, no session at all, odd ids (over-long), and hint abuse (a new tool declared
   on every call with the longest pause, to hoard KV and flood the tool table), each strategy as a
   tenant of its own. For each, two charges as ratios of the honest client's: the program's (`attained_service_s`
   of the session its calls ran in, which orders its next call among the tenant's programs) and
   the tenant's (the engine time the engines counted for the tenant, read from their queue
   snapshots: what orders its calls against other tenants' under the tenant fair share).
2. Harm: a light tenant's mean program latency while a heavy tenant behaves (sessions), and while
   it attacks with each strategy, on an engine with few slots so calls queue.

Sessionless and session-per-call calls are each a one-call program, at 0 service by construction;
the tenant charge is what catches them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from loadgen.live.real_servers import free_port
from loadgen.live.stack_process import start_stack
from loadgen.results_json import write_json
from shared.bus import Bus, Incoming
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.stats import percentile

STRATEGIES = ("honest", "forged_threads", "session_per_call", "sessionless", "odd_ids", "hint_abuse")
# the harm phases: the heavy tenant behaving, then each strategy that could hurt another tenant
HARM_STRATEGIES = ("honest", "session_per_call", "sessionless", "forged_threads", "hint_abuse")
MODEL = "autellix-lite"


@dataclass
class ProgramResult:
    strategy: str
    sessions: list[str] = field(default_factory=list)
    served: int = 0
    refused: dict[int, int] = field(default_factory=dict)  # HTTP status -> count
    latency_s: float = 0.0


def _headers(key: str, strategy: str, session: str, i: int) -> tuple[dict[str, str], str | None]:
    """The call's headers and the session it belongs to, as the strategy sends them."""
    h = {"Authorization": f"Bearer {key}"}
    match strategy:
        case "honest":
            return h | {"X-Session-Id": session}, session
        case "forged_threads":
            return h | {"X-Session-Id": session, "X-Thread-Id": f"t-{uuid.uuid4().hex}"}, session
        case "session_per_call":
            fresh = f"{session}-{i}"
            return h | {"X-Session-Id": fresh}, fresh
        case "sessionless":
            return h, None
        case "hint_abuse":  # a new tool class on every call, each declaring the longest pause: KV kept
            # for the session as long as the clamp allows, and the tool table flooded with classes
            return h | {"X-Session-Id": session, "X-Next-Tool": f"tool-{uuid.uuid4().hex[:12]}",
                        "X-Next-Tool-Idle-S": "1e12"}, session
        case "odd_ids":
            odd = "x" * (300 if i % 2 else 10_000)  # (a NUL cannot ride in an HTTP header at all)
            return h | {"X-Session-Id": session, "X-Thread-Id": odd}, session
    raise ValueError(f"unknown strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")


async def run_program(http: httpx.AsyncClient, key: str, strategy: str, calls: int, max_tokens: int) -> ProgramResult:
    result = ProgramResult(strategy)
    session = f"{strategy}-{secrets.token_hex(6)}"
    t0 = time.monotonic()
    for i in range(calls):
        headers, sid = _headers(key, strategy, session, i)
        r = await http.post("/v1/chat/completions", headers=headers, json={
            "model": MODEL, "max_tokens": max_tokens, "messages": [{"role": "user", "content": f"step {i}"}]})
        if r.status_code == 200:
            result.served += 1
            if sid is not None and sid not in result.sessions:
                result.sessions.append(sid)
        else:
            result.refused[r.status_code] = result.refused.get(r.status_code, 0) + 1
    result.latency_s = time.monotonic() - t0
    return result


async def charged_s(http: httpx.AsyncClient, key: str, sessions: list[str], served: int) -> list[float]:
    """Each session's attained service once every served call is folded in."""
    headers = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + 30
    while True:
        views = [(await http.get(f"/v1/sessions/{s}", headers=headers)).json() for s in sessions]
        if sum(v.get("num_calls", 0) for v in views) >= served or time.monotonic() > deadline:
            return [v.get("attained_service_s", 0.0) for v in views]
        await asyncio.sleep(0.2)


class TenantCharges:
    """The engines' cumulative per-tenant engine time, from their queue snapshots (latest per engine)."""

    def __init__(self) -> None:
        self._by_engine: dict[str, dict[str, float]] = {}

    async def start(self, bus: Bus) -> None:
        await bus.subscribe(subjects.all_engine_queues(), self._on_snapshot, types=(m.EngineQueueSnapshot,))

    async def _on_snapshot(self, msg: Incoming) -> None:
        self._by_engine[msg.body.engine_id] = dict(msg.body.tenant_service_s)

    def of(self, tenant: str) -> float:
        return sum(counters.get(tenant, 0.0) for counters in self._by_engine.values())

    async def settled(self, tenant: str, quiet_s: float = 1.0, timeout_s: float = 30.0) -> float:
        """The tenant's charge once it stopped changing for `quiet_s` (the last snapshots are in)."""
        deadline, last, since = time.monotonic() + timeout_s, -1.0, time.monotonic()
        while time.monotonic() < deadline:
            now = self.of(tenant)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
            await asyncio.sleep(0.1)
        return last


async def measure_charging(url: str, keys: dict[str, tuple[str, str]], calls: int, max_tokens: int,
                           charges: TenantCharges | None = None) -> dict:
    """`keys`: strategy -> (tenant, API key); one tenant per strategy keeps the tenant charges apart."""
    out = {}
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        for strategy, (tenant, key) in keys.items():
            before = await charges.settled(tenant) if charges is not None else 0.0
            prog = await run_program(http, key, strategy, calls, max_tokens)
            services = await charged_s(http, key, prog.sessions, prog.served) if prog.sessions else []
            out[strategy] = {"tenant": tenant, "served": prog.served, "refused": prog.refused,
                             "sessions": len(prog.sessions),
                             # what orders the program's next call: the service of the session it runs in
                             "charged_s": max(services) if services else 0.0,
                             "total_charged_s": sum(services),
                             "tenant_charged_s": (await charges.settled(tenant) - before
                                                  if charges is not None else None)}
    honest = out["honest"]
    for row in out.values():  # no ratio for work that was refused rather than served
        row["charged_vs_honest"] = (row["charged_s"] / honest["charged_s"]
                                    if honest["charged_s"] > 0 and row["served"] else None)
        row["tenant_charged_vs_honest"] = (row["tenant_charged_s"] / honest["tenant_charged_s"]
                                           if honest["tenant_charged_s"] and row["served"] else None)
    return out


async def measure_charging_on(url: str, nats_url: str, keys: dict[str, tuple[str, str]], calls: int,
                              max_tokens: int) -> dict:
    bus = await Bus.connect(nats_url, service="attack")
    try:
        charges = TenantCharges()
        await charges.start(bus)
        return await measure_charging(url, keys, calls, max_tokens, charges)
    finally:
        await bus.close()


async def measure_harm(url: str, keys: dict[str, str], heavy_strategy: str, duration_s: float,
                       heavy_programs: int, light_every_s: float) -> dict:
    """The light tenant's program latencies while the heavy tenant runs `heavy_strategy`."""
    stop = asyncio.Event()
    light: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        async def heavy() -> None:
            while not stop.is_set():
                await run_program(http, keys["heavy"], heavy_strategy, 8, 64)

        async def light_loop() -> None:
            tasks = []
            while not stop.is_set():
                tasks.append(asyncio.create_task(run_program(http, keys["light"], "honest", 3, 8)))
                await asyncio.sleep(light_every_s)
            light.extend(r.latency_s for r in await asyncio.gather(*tasks))
        workers = [asyncio.create_task(heavy()) for _ in range(heavy_programs)]
        lights = asyncio.create_task(light_loop())
        await asyncio.sleep(duration_s)
        stop.set()
        await lights
        await asyncio.gather(*workers)
    return {"heavy_strategy": heavy_strategy, "light_programs": len(light),
            "light_mean_latency_s": statistics.fmean(light) if light else None,
            "light_p90_latency_s": percentile(light, 90) if len(light) >= 10 else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.live.attack", description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="atlas")
    ap.add_argument("--calls", type=int, default=16, help="calls of the charged program")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--max-num-seqs", type=int, default=4, help="engine slots: calls queue beyond them")
    ap.add_argument("--harm-s", type=float, default=45.0, help="seconds per harm phase (0: skip)")
    ap.add_argument("--heavy-programs", type=int, default=6)
    ap.add_argument("--light-every-s", type=float, default=1.5)
    ap.add_argument("--no-fair-share", action="store_true", help="run with TENANT_FAIR_SHARE=false (the baseline)")
    ap.add_argument("--kv-policy", choices=("prefix-lru", "workflow"), default="prefix-lru",
                    help="ENGINE_KV_POLICY: workflow keeps a session's KV for its declared tool pause "
                         "(what hint_abuse tries to hoard)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    keys = {"heavy": f"sk-heavy-{secrets.token_hex(8)}", "light": f"sk-light-{secrets.token_hex(8)}"}
    charging_keys = {s: (f"charge-{s.replace('_', '-')}", f"sk-{s.replace('_', '-')}-{secrets.token_hex(8)}")
                     for s in STRATEGIES}
    api_keys = [*keys.items(), *charging_keys.values()]
    stack = start_stack(args.policy, 1, free_port(), max_num_seqs=args.max_num_seqs,
                        extra_env={"AUTELLIX_API_KEYS": ",".join(f"{t}:{k}" for t, k in api_keys),
                                   "ENGINE_KV_POLICY": args.kv_policy,
                                   **({"TENANT_FAIR_SHARE": "false"} if args.no_fair_share else {})})
    try:
        charging = asyncio.run(measure_charging_on(stack.url, stack.nats_url,
                                                   charging_keys, args.calls, args.max_tokens))
        harm = []
        if args.harm_s > 0:
            for strategy in HARM_STRATEGIES:
                harm.append(asyncio.run(measure_harm(stack.url, keys, strategy, args.harm_s, args.heavy_programs,
                                                     args.light_every_s)))
    finally:
        stack.stop()
    behaving = next((h["light_mean_latency_s"] for h in harm if h["heavy_strategy"] == "honest"), None)
    for h in harm:
        h["light_latency_vs_behaving"] = (h["light_mean_latency_s"] / behaving
                                          if behaving and h["light_mean_latency_s"] else None)
    result = {"policy": args.policy, "tenant_fair_share": not args.no_fair_share,
              "engine": {"backend": "lite", "max_num_seqs": args.max_num_seqs, "kv_policy": args.kv_policy},
              "charged_program_calls": args.calls, "max_tokens": args.max_tokens,
              "charging": charging, "harm": harm,
              "command": "python -m loadgen.live.attack " + " ".join(sys.argv[1:] if argv is None else argv)}
    print(json.dumps(result, indent=2))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
