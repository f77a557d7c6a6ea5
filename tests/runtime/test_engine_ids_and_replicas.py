"""Engine ids come from the host when ENGINE_ID is unset, and a second agent with the same id refuses
to start (two real agents on a NATS server of the test's own); JETSTREAM_REPLICAS is refused
outside 1..5 with its name, and the streams' owner makes both streams with it."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from runtime.nats_server import NatsServer
from runtime.processes import base_env, python_module_argv
from services.engine_agent.host_id import host_engine_id
from services.engine_agent.settings import EngineAgentSettings
from shared.bus import jetstream
from shared.settings import MeshSettings

UNSAFE = set(".*> \t\n")


@given(st.text(max_size=80), st.one_of(st.none(), st.text(max_size=12)))
def test_a_host_engine_id_is_always_a_subject_token(hostname, devices):
    engine_id = host_engine_id(hostname, devices)
    assert engine_id and not UNSAFE & set(engine_id)
    assert engine_id == host_engine_id(hostname, devices)  # stable: the same host gets it back
    EngineAgentSettings(engine_id=engine_id)  # and the settings take it


def test_host_name_and_one_gpu():
    assert host_engine_id("GPU-Node-3.cluster.local") == "gpu-node-3"
    assert host_engine_id("gpu-node-3", "1") == "gpu-node-3-gpu1"
    assert host_engine_id("gpu-node-3", "0,1") == "gpu-node-3"  # several GPUs: one agent, the host's id


def test_the_default_engine_id_is_the_host_s(monkeypatch):
    monkeypatch.delenv("ENGINE_ID", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert EngineAgentSettings().engine_id == host_engine_id(socket.gethostname())


def test_a_second_agent_on_the_same_host_refuses_to_start(tmp_path):
    with NatsServer(tmp_path / "nats", engine_ids=(host_engine_id(socket.gethostname()),)) as nats:
        env = base_env({"NATS_URL": nats.engine_url(host_engine_id(socket.gethostname())), "ENGINE_BACKEND": "lite",
                        "HEARTBEAT_INTERVAL_S": "0.2"})
        env.pop("ENGINE_ID", None)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        first = subprocess.Popen(python_module_argv("services.engine_agent"), env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for_heartbeat(nats, host_engine_id(socket.gethostname()), first)
            second = subprocess.run(python_module_argv("services.engine_agent"), env=env, capture_output=True,
                                    text=True, timeout=60)
        finally:
            first.terminate()
            first.wait(timeout=30)
    assert second.returncode != 0
    assert f"engine id {host_engine_id(socket.gethostname())!r} is already in use" in second.stderr
    assert "ENGINE_ID" in second.stderr


def _wait_for_heartbeat(nats: NatsServer, engine_id: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    import asyncio

    from shared.bus import Bus
    from shared.protocol import subjects

    async def wait() -> None:
        bus = await Bus.connect(nats.url, service="test")
        try:
            sub = await bus.nc.subscribe(subjects.engine_heartbeat(engine_id))
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                assert proc.poll() is None, "the first agent exited"
                try:
                    await sub.next_msg(timeout=0.5)
                    return
                except Exception:  # not yet: it is still starting
                    continue
            raise AssertionError(f"no heartbeat from {engine_id} within {timeout_s:g} s")
        finally:
            await bus.close()
    asyncio.run(wait())


@pytest.mark.parametrize("value", ["0", "6", "-1"])
def test_replicas_outside_1_to_5_are_refused_by_name(monkeypatch, value):
    monkeypatch.setenv("JETSTREAM_REPLICAS", value)
    with pytest.raises(ValidationError, match="JETSTREAM_REPLICAS must be 1..5"):
        MeshSettings()


def test_both_streams_carry_the_replicas():
    assert jetstream.audit_stream_config(replicas=3).num_replicas == 3
    assert jetstream.completions_stream_config(replicas=3).num_replicas == 3
    assert jetstream.audit_stream_config().num_replicas == jetstream.completions_stream_config().num_replicas == 1


async def test_a_single_server_refuses_r3_so_the_setting_is_not_silently_ignored(make_bus):
    """On one server JetStream cannot place three copies: the owner's start-up fails loudly."""
    bus = await make_bus("test")
    with pytest.raises(Exception, match="replicas > 1 not supported in non-clustered mode"):
        await jetstream.ensure_audit_stream(bus.js, replicas=3)
