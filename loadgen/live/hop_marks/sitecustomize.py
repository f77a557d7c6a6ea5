"""Per-hop timestamps of one call through the mesh, for `loadgen.live.real_hops` only.

A process started with this folder first on PYTHONPATH and HOP_MARKS_DIR set imports this file at
start-up; it wraps a few functions of the API, router and engine agent as their modules load and
appends `wall-clock-ns key mark` lines to HOP_MARKS_DIR/<pid>.log (one write of ~50 bytes per mark,
a few per call). HOP_MARKS_LAG_MS=N also starts, in the engine agent, a task that notes each time
its event loop woke more than N ms late (the loop waited for a core, or something held it); it
wakes every 10 ms.
Nothing here is imported by the mesh itself."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import time

_DIR = os.environ.get("HOP_MARKS_DIR", "")
_LAG_MS = float(os.environ.get("HOP_MARKS_LAG_MS", "0") or 0)
_out = None
_counts: dict[tuple[str, str], int] = {}


def mark(key: str, name: str) -> None:
    global _out
    if _out is None:
        _out = open(f"{_DIR}/{os.getpid()}.log", "a", buffering=1)  # noqa: SIM115 (kept for the process)
    _out.write(f"{time.time_ns()} {key} {name}\n")


def mark_first(key: str, name: str, limit: int = 3) -> None:
    """`name0`, `name1`, ... for the first `limit` times per key."""
    seen = _counts.get((key, name), 0)
    if seen < limit:
        _counts[(key, name)] = seen + 1
        mark(key, f"{name}{seen}")
    if len(_counts) > 100_000:
        _counts.clear()


def _around(owner, attr: str, label: str, key_of) -> None:
    orig = getattr(owner, attr)

    @functools.wraps(orig)
    async def wrapped(*args, **kwargs):
        key = key_of(*args, **kwargs)
        mark(key, label + "_in")
        try:
            return await orig(*args, **kwargs)
        finally:
            mark(key, label + "_out")
    setattr(owner, attr, wrapped)


def _each_yield(owner, attr: str, label: str, key_of) -> None:
    orig = getattr(owner, attr)

    @functools.wraps(orig)
    async def wrapped(*args, **kwargs):
        key = key_of(*args, **kwargs)
        mark(key, label + "_in")
        async for item in orig(*args, **kwargs):
            mark_first(key, label + "_y")
            yield item
        mark(key, label + "_end")
    setattr(owner, attr, wrapped)


def _lag_monitor() -> None:
    import asyncio

    async def watch() -> None:
        step = 0.01  # 100 wake-ups a second
        while True:
            t = time.perf_counter()
            await asyncio.sleep(step)
            late_ms = (time.perf_counter() - t - step) * 1e3
            if late_ms > _LAG_MS:
                mark("loop", f"late_{late_ms:.0f}ms")
    asyncio.get_running_loop().create_task(watch())


def _patch_api(mod) -> None:
    if mod.__name__.endswith("call_stream"):
        _around(mod.CallStream, "place", "api_route", lambda self, route: route.call_id)
        chunks = mod.CallStream._chunks

        async def marked_chunks(self):
            async for piece in chunks(self):
                mark_first(self.call_id, "api_yield")
                yield piece
        mod.CallStream._chunks = marked_chunks
    else:  # gateway
        _around(mod.Gateway, "start_call", "api_start", lambda self, tenant, call, *a, **k: call.call_id)
        on_token = mod.Gateway._on_token

        async def marked_token(self, raw):
            mark_first(raw.subject.rsplit(".", 1)[-1], "api_tok")
            return await on_token(self, raw)
        mod.Gateway._on_token = marked_token


def _patch_agent(mod) -> None:
    agent = mod.VllmEngineAgent
    _around(agent, "on_command", "e_cmd", lambda self, msg: getattr(getattr(msg.body, "call", msg.body), "call_id", "?"))
    send = agent._send

    async def marked_send(self, live, chunk):
        await send(self, live, chunk)
        mark_first(live.route.call_id, "e_sent")
    agent._send = marked_send
    if _LAG_MS:
        init = agent.__init__

        def init_and_watch(self, *args, **kwargs):
            init(self, *args, **kwargs)
            _lag_monitor()
        agent.__init__ = init_and_watch


def _patch(mod) -> None:
    name = mod.__name__
    if name.startswith("services.session_api."):  # its modules in _TARGETS
        _patch_api(mod)
    elif name == "services.router.handlers":
        _around(mod.RouterHandlers, "on_route", "r_route", lambda self, msg: msg.body.call_id)
    elif name == "services.engine_agent.vllm_agent":
        _patch_agent(mod)
    elif name == "services.engine_agent.upstream_serving":
        _each_yield(mod.UpstreamServing, "answer", "e_engine", lambda self, route: route.call_id)
        _around(mod.UpstreamServing, "scrape", "e_scrape", lambda self: "scrape")
    elif name == "shared.engine.vllm_serving":
        import json

        _each_yield(mod.VllmServing, "request", "e_engine", lambda self, path, body: json.loads(body)["request_id"])


_TARGETS = frozenset({"services.session_api.call_stream", "services.session_api.gateway", "services.router.handlers",
                      "services.engine_agent.vllm_agent", "services.engine_agent.upstream_serving",
                      "shared.engine.vllm_serving"})


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _TARGETS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_and_patch(module) -> None:
            run(module)
            _patch(module)
        spec.loader.exec_module = exec_and_patch
        return spec


if _DIR:
    sys.meta_path.insert(0, _PatchAfterImport())
