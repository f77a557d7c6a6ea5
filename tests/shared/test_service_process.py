"""run_service: logging and the unknown-variable report first, then the service to its end."""

import asyncio
import gc
import importlib

import pytest
import uvloop

from shared.service_process import freeze_startup_heap, run_service
from shared.settings import MeshSettings


def test_runs_a_coroutine_service_on_the_given_loop_after_the_report():
    order = []

    async def serve(settings):
        order.append(("served", settings.log_level))

    def loop(coro):
        order.append("loop")
        asyncio.run(coro)

    assert run_service("t", MeshSettings(), serve, report_unknown=lambda s: order.append("report"), loop=loop) == 0
    assert order == ["report", "loop", ("served", "info")]


def test_a_plain_function_runs_its_own_loop():
    seen = []
    assert run_service("t", MeshSettings(), seen.append) == 0
    assert len(seen) == 1


def test_freeze_moves_the_heap_out_of_the_collector():
    before = gc.get_threshold()
    try:
        freeze_startup_heap(gen0_threshold=12_345)
        assert gc.get_freeze_count() > 0 and gc.get_threshold()[0] == 12_345
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_a_coroutine_service_runs_on_uvloop_by_default():
    loops = []

    async def serve(settings):
        loops.append(type(asyncio.get_running_loop()))

    assert run_service("t", MeshSettings(), serve) == 0
    assert loops == [uvloop.Loop]


@pytest.mark.parametrize(("service", "entry"), [("process_table", "main"), ("controller", "main"), ("router", "run")])
def test_every_mesh_service_keeps_the_default_loop(service, entry, monkeypatch):
    """One event loop for every service: none of their mains overrides run_service's."""
    main = importlib.import_module(f"services.{service}.main")
    calls = []
    monkeypatch.setenv("DATABASE_URL", "postgresql://autellix@localhost/autellix")  # read, never connected
    monkeypatch.setattr(main, "run_mesh_service", lambda *args, **options: calls.append(options) or 0)
    getattr(main, entry)()
    assert calls == [{}]
