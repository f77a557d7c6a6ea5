"""Memory follows open programs, not history: when a session closes or expires, or a one-call
program's call completes, the engine agents' program directories and the controller forget it,
and late updates do not bring it back. The whole serving stack in this process (real NATS, real
PostgreSQL, process table, router, two lite engine agents, session API) plus a controller."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest

from runtime.nats_server import NatsServer
from services.controller.handlers import ControllerService
from services.controller.settings import ControllerSettings
from services.session_api.session_lookups import lookup_key
from shared.core.program import ServiceAggregation
from shared.engine.program_directory import CachedProgramDirectory
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.serving.api_replica import api_replica
from tests.serving.stack import start_stack

MODEL = "autellix-lite"


# --- the directory alone ---------------------------------------------------------------------------
def test_directory_forgets_a_one_call_program_at_its_completion_and_ignores_its_update():
    directory = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    directory.ledger("call-c1")  # the call arrived
    directory.call_finished("call-c1", "c1")
    assert len(directory) == 0
    assert not directory.apply_update("call-c1", 0.5, 0.1, {"main": 0.5}, epoch=0, num_completed_calls=1)
    assert not directory.apply_update("call-c1", 0.0, 0.0, {}, epoch=1, num_completed_calls=1)  # promoted
    assert len(directory) == 0
    # an engine that never ran the call ignores the update too; a session's update is kept
    assert directory.apply_update("s-open", 1.0, 0.0, {"main": 1.0}, epoch=0, num_completed_calls=1)
    assert len(directory) == 1


def test_directory_forgets_a_closed_session_and_its_stragglers():
    directory = CachedProgramDirectory(ServiceAggregation.SUM, closed_capacity=2)
    directory.apply_update("s-1", 1.0, 0.0, {"main": 1.0}, epoch=0, num_completed_calls=1)
    directory.ledger("s-1")
    directory.close("s-1")
    assert len(directory) == 0
    assert not directory.apply_update("s-1", 2.0, 0.0, {"main": 2.0}, epoch=0, num_completed_calls=2)
    directory.ledger("s-1")  # a call of the closed session still running here
    directory.call_finished("s-1", "c9")
    assert len(directory) == 0
    directory.close("s-2")
    directory.close("s-3")
    assert directory.num_closed_remembered == 2  # bounded


def test_lite_engine_keeps_no_memo_of_one_call_programs_but_does_of_sessions():
    from shared.core.policy import SchedulingPolicy
    from shared.core.starvation import StarvationConfig
    from shared.engine.api import EngineCall
    from shared.engine.lite import LiteEngine, LiteEngineConfig

    policy = SchedulingPolicy("plas")
    directory = CachedProgramDirectory(policy.aggregation)
    engine = LiteEngine("e0", policy, directory, LiteEngineConfig(num_blocks=4096, starvation=StarvationConfig(beta=None)))
    now_s = 0.0
    for i, program in enumerate(["call-a", "call-b", "s-1", "s-1"]):
        segments = (("sys", 64), (f"user{i}", 40))
        call_id = program.removeprefix("call-") if program.startswith("call-") else f"c{i}"
        engine.submit(EngineCall(call_id=call_id, program_id=program, thread_id="main",
                                 prompt_segments=segments, max_output_tokens=4, arrival_s=now_s,
                                 program_arrival_s=now_s, seq=i), now_s)
        while engine.has_work():
            report = engine.step(now_s)
            now_s += report.duration_s
            for done in report.finished:
                directory.call_finished(done.program_id, done.call_id)
    # the shared system prompt is memoised once; only the session's own last segments are added
    assert len(engine._memo._memo) == 1 + 2
    assert len(directory) == 1  # the session is held until it closes


# --- the live stack --------------------------------------------------------------------------------
@pytest.fixture
async def live(tmp_path, postgres_server, _migrated_template, monkeypatch):
    # sessions expire 1 s after their last activity, swept every 0.3 s
    monkeypatch.setenv("SESSION_IDLE_TTL_S", "1.0")
    monkeypatch.setenv("SESSION_EXPIRY_INTERVAL_S", "0.3")
    # its own NATS server: on the shared one the serving tests' stack (session-scoped) would answer
    # this stack's session requests from another database
    nats = NatsServer(tmp_path / "nats").start()
    nats_url = nats.url
    stack = await start_stack(nats_url, postgres_server.create_database(template=_migrated_template))
    bus = None
    controller = None
    try:
        from shared.bus import Bus

        bus = await Bus.connect(nats_url, service="controller", connect_timeout_s=5.0)
        controller = ControllerService(bus, ControllerSettings(nats_url=nats_url, decision_interval_s=0.1))
        await controller.start()
        yield stack, controller
    finally:
        if controller is not None:
            await controller.stop()
        if bus is not None:
            await bus.close()
        await stack.stop()
        nats.stop()


def _held(stack, controller, program_id: str, api=None) -> list[str]:
    """Which caches still hold the program (`api`: an API process's gateway, its cached lookup too)."""
    where = [eid for eid, agent in stack.agents.items() if program_id in agent.agent.directory._ledgers]
    if controller.view.holds(program_id):
        where.append("controller")
    if api is not None and lookup_key("acme", program_id) in api.session_lookups._cached:
        where.append("api")
    return where


async def _until_forgotten(stack, controller, program_id: str, timeout_s: float = 5.0, api=None) -> None:
    deadline = time.monotonic() + timeout_s
    while _held(stack, controller, program_id, api):
        assert time.monotonic() < deadline, f"{program_id} still held by {_held(stack, controller, program_id, api)}"
        await asyncio.sleep(0.05)


async def test_closed_expired_and_one_call_programs_are_forgotten_everywhere(live):
    stack, controller = live
    headers = {"Authorization": f"Bearer {stack.key('acme')}"}
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers) as http:
        sid = (await http.post("/v1/sessions", json={})).json()["id"]
        messages = [{"role": "user", "content": "plan the next step " * 20}]
        for thread in ("main", "left"):  # a forked thread too
            extra = {"X-Session-Id": sid, "X-Thread-Id": thread}
            if thread != "main":
                extra["X-Parent-Thread-Id"] = "main"
            await client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4, extra_headers=extra)
        # the engines that ran its calls and the controller hear the process table's update of a
        # session; an engine that ran none does not (services/engine_agent/program_updates.py)
        ran = {eid for eid, agent in stack.agents.items() if sid in agent.agent.program_updates}
        assert ran
        deadline = time.monotonic() + 5.0
        while set(_held(stack, controller, sid)) != ran | {"controller"}:
            assert time.monotonic() < deadline, f"{sid} held by {_held(stack, controller, sid)}, ran on {ran}"
            await asyncio.sleep(0.05)
        assert (await http.delete(f"/v1/sessions/{sid}")).status_code == 200
        await _until_forgotten(stack, controller, sid)

        # a late update of the closed session (a straggler's completion) does not bring it back
        await controller.bus.publish(subjects.program_service(sid), m.ProgramServiceUpdated(
            program_id=sid, service_s=9.0, wait_s=0.0, epoch=0, num_completed_calls=3))
        await asyncio.sleep(0.3)
        assert _held(stack, controller, sid) == []

        # an abandoned session expires (idle TTL) and is forgotten the same way, by an API process
        # that kept its lookup too (its next call is refused at once, not after the cache's minute)
        idle = (await http.post("/v1/sessions", json={})).json()["id"]
        apps: list = []
        async with api_replica(stack, apps) as replica_url:
            api = apps[0].state.gateway
            replica = openai.AsyncOpenAI(base_url=f"{replica_url}/v1", api_key=stack.key("acme"), max_retries=0)
            while (kept := api.session_lookups._cached.get(lookup_key("acme", idle))) is None or not kept[1].primary_engine:
                await replica.chat.completions.create(model=MODEL, messages=messages, max_tokens=4,
                                                      extra_headers={"X-Session-Id": idle})
            await _until_forgotten(stack, controller, idle, timeout_s=8.0, api=api)
            with pytest.raises(openai.ConflictError) as refused:
                await replica.chat.completions.create(model=MODEL, messages=messages, max_tokens=4,
                                                      extra_headers={"X-Session-Id": idle})
            assert refused.value.code == "session_ended"
        assert (await http.get(f"/v1/sessions/{idle}")).json()["status"] in ("closed", "expired")

    # a call without a session: a one-call program, forgotten once its call completed
    resp = await client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4)
    program_id = f"call-{resp.id.removeprefix('chatcmpl-')}"
    await asyncio.sleep(0.5)  # its update reaches every engine and the controller meanwhile
    assert _held(stack, controller, program_id) == []
