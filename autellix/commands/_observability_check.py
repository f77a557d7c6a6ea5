"""What an operator sees while agents run: every dashboard panel has data, and `autellix top` shows a
program soon after its first call.

Starts `autellix up` (lite engines), runs the live load generator against it and, beside it, probe
programs with client-chosen session ids. Every process's /metrics is scraped every second. The
`autellix top` view (the same `TopView`, fed from the bus as the command feeds it) records when
each probe program first appears; the delay is counted from the moment its first call was sent.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from autellix.commands._top_view import SUBJECTS as TOP_SUBJECTS
from autellix.commands._top_view import TopView
from loadgen.bench.promql_names import dashboard_exprs, metric_names
from loadgen.live.real_servers import free_port
from loadgen.live.run import LiveRunConfig, run_live
from loadgen.live.stack_process import StackProcess, start_stack
from runtime.metrics_targets import TARGETS_NAME
from services.session_api.session_ids import program_id_for
from shared.bus import Bus
from shared.stats import percentile

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "autellix.json"


class SeenPrograms:
    """A TopView that notes when each program id first appears in it."""

    def __init__(self) -> None:
        self.view = TopView()
        self.first_seen_s: dict[str, float] = {}

    async def on_message(self, msg) -> None:
        self.view.on_message(msg.body)
        now = time.monotonic()
        for program_id in self.view.programs.keys() - self.first_seen_s.keys():
            self.first_seen_s[program_id] = now


def _series_with_data(text: str) -> set[str]:
    """Sample names a panel would draw: any gauge sample (0 is a reading), counters and histograms
    only once non-zero (the panels take their rates; a histogram as _bucket/_sum/_count)."""
    out = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.value or family.type == "gauge":
                out.add(sample.name)
    return out


async def scrape_forever(targets: list[dict], seen: set[str], rounds: list[int], stop: asyncio.Event,
                         interval_s: float = 1.0) -> None:
    async with httpx.AsyncClient(timeout=2.0) as http:
        while not stop.is_set():
            for target in targets:
                try:
                    resp = await http.get(f"http://{target['targets'][0]}/metrics")
                    seen |= _series_with_data(resp.text)
                except httpx.HTTPError:
                    pass
            rounds[0] += 1
            try:
                await asyncio.wait_for(stop.wait(), interval_s)
            except TimeoutError:
                pass


async def probe_programs(url: str, key: str, count: int, every_s: float, calls: int) -> tuple[dict[str, float], dict]:
    """Programs with client-chosen session ids: the time each one's first call was sent (by session
    id), and the calls that did not get a 200 (by status, or the transport error's name)."""
    sent: dict[str, float] = {}
    failed: dict[str, int] = {}
    headers = {"Authorization": f"Bearer {key}"}

    async def one(session_id: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            for i in range(calls):
                if i == 0:
                    sent[session_id] = time.monotonic()
                try:
                    r = await http.post("/v1/chat/completions", headers=headers | {"X-Session-Id": session_id}, json={
                        "model": "autellix-lite", "max_tokens": 16,
                        "messages": [{"role": "user", "content": f"step {i}"}]})
                    outcome = None if r.status_code == 200 else str(r.status_code)
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                if outcome is not None:
                    failed[outcome] = failed.get(outcome, 0) + 1
    tasks = []
    for i in range(count):
        tasks.append(asyncio.create_task(one(f"probe-{secrets.token_hex(4)}-{i}")))
        await asyncio.sleep(every_s)
    await asyncio.gather(*tasks)
    return sent, failed


def panel_report(seen: set[str]) -> dict:
    """Per dashboard panel: whether some query of it reads a series that had data."""
    panels: dict[str, bool] = {}
    for title, expr in dashboard_exprs(json.loads(DASHBOARD.read_text())):
        names = metric_names(expr)
        panels[title] = panels.get(title, False) or bool(names & seen)
    return {"panels": len(panels), "with_data": sum(panels.values()),
            "without_data": sorted(t for t, ok in panels.items() if not ok)}


async def observe(stack: StackProcess, workload: str, rate: float, duration_s: float, probes: int) -> dict:
    targets = json.loads((stack.state_dir / TARGETS_NAME).read_text())
    bus = await Bus.connect(stack.nats_url, service="observability-check")
    watcher = SeenPrograms()
    for subject, types in TOP_SUBJECTS:
        await bus.subscribe(subject, watcher.on_message, types=types)
    seen: set[str] = set()
    rounds = [0]
    stop = asyncio.Event()
    scraper = asyncio.create_task(scrape_forever(targets, seen, rounds, stop))
    try:
        live = asyncio.create_task(run_live(LiveRunConfig(url=stack.url, api_key=stack.api_key, workload=workload,
                                                          rates=[rate], duration_s=duration_s)))
        sent, probe_failures = await probe_programs(stack.url, stack.api_key, probes, duration_s / max(probes, 1),
                                                    calls=3)
        live_result = await live
        await asyncio.sleep(2.0)  # the last scrape and state ticks after the load
    finally:
        stop.set()
        await scraper
        await bus.close()
    # the mesh knows a client-chosen session by a program id derived from (tenant, id)
    first_seen = {s: watcher.first_seen_s.get(program_id_for(stack.tenant, s)) for s in sent}
    delays = [first_seen[s] - t for s, t in sent.items() if first_seen[s] is not None]
    point = next(iter(live_result["policies"].values()))["points"][0]
    return {
        "load": {"workload": workload, "rate": rate, "duration_s": duration_s,
                 "programs": point["num_programs"], "programs_completed": point["completed_programs"],
                 "probe_programs": len(sent), "probe_call_failures": probe_failures},
        "scrape": {"targets": len(targets), "interval_s": 1.0, "rounds": rounds[0]},
        "dashboard": panel_report(seen),
        "top": {"programs": len(sent), "shown": len(delays), "missing": len(sent) - len(delays),
                "delay_p50_s": percentile(delays, 50) if delays else None,
                "delay_p99_s": percentile(delays, 99) if delays else None,
                "delay_max_s": max(delays) if delays else None,
                "within_1s": sum(d <= 1.0 for d in delays)},
    }


def run(workload: str, rate: float, duration_s: float, probes: int, policy: str, max_num_seqs: int | None = None,
        engine_env: dict[str, str] | None = None) -> dict:
    stack = start_stack(policy, 2, free_port(), max_num_seqs=max_num_seqs, extra_env=engine_env)
    try:
        result = asyncio.run(observe(stack, workload, rate, duration_s, probes))
    finally:
        stack.stop()
    return {"benchmark": "dashboard panels with data and autellix top's delay, under the live load generator",
            "policy": policy, "engines": {"backend": "lite", "count": 2, "max_num_seqs": max_num_seqs,
                                          **(engine_env or {})}, **result}
