"""How the calls of a window split over the session API workers of one `autellix up`: per worker,
its client connections on the shared port and the calls it answered.

SO_REUSEPORT gives each new connection to a worker by a hash of its addresses, and a keep-alive
connection stays with that worker; so the split of calls follows the split of connections (and
each worker's speed). Calls come from each worker's own counter on its own port
(API_WORKER_PORT, listed in the stack's metrics.json), connections from /proc (psutil).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import httpx
import psutil

CALLS = "autellix_api_calls_total"


def api_workers(state_dir: Path) -> dict[str, tuple[int, str]]:
    """session_api process name -> (pid, its /metrics URL), from up.json and metrics.json."""
    pids = json.loads((state_dir / "up.json").read_text())["pids"]
    targets = json.loads((state_dir / "metrics.json").read_text())
    return {t["labels"]["process"]: (pids[t["labels"]["process"]], f"http://{t['targets'][0]}/metrics")
            for t in targets if t["labels"]["service"] == "session_api"}


async def calls_so_far(workers: dict[str, tuple[int, str]]) -> dict[str, float]:
    """Each worker's calls answered so far (the sum of its call counter's series)."""
    out = {}
    async with httpx.AsyncClient(timeout=5.0) as http:
        for name, (_, url) in workers.items():
            text = (await http.get(url)).text
            out[name] = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                            if line.startswith(CALLS + "{"))
    return out


def connections(workers: dict[str, tuple[int, str]], port: int) -> dict[str, int]:
    """Each worker's established client connections on the shared port."""
    out = {}
    for name, (pid, _) in workers.items():
        with contextlib.suppress(psutil.Error):
            out[name] = sum(1 for c in psutil.Process(pid).net_connections("tcp")
                            if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)
    return out


def split(before: dict[str, float], after: dict[str, float], conns: dict[str, int]) -> dict:
    """Per worker: connections, calls in the window and their share; and the largest share."""
    calls = {name: int(after[name] - before.get(name, 0.0)) for name in after}
    total = sum(calls.values()) or 1
    per = {name: {"connections": conns.get(name), "calls": calls[name], "share": round(calls[name] / total, 3)}
           for name in sorted(calls)}
    return {"per_worker": per, "largest_share": max(w["share"] for w in per.values()),
            "even_share": round(1 / len(per), 3)}
