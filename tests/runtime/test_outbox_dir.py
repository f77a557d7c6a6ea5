"""`autellix up` gives each engine agent a completion outbox inside the stack's state folder (so a
test stack's files go with it), unless the operator set ENGINE_OUTBOX_DIR."""

from __future__ import annotations

from runtime.catalog import HealthProbe, Instance
from runtime.supervisor import Stack, StackConfig


def _engine() -> Instance:
    return Instance("engine_agent-e0", "services.engine_agent", {"ENGINE_ID": "e0"}, HealthProbe.HEARTBEAT, "e0")


def test_an_engine_keeps_its_outbox_in_the_state_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("ENGINE_OUTBOX_DIR", raising=False)
    stack = Stack(StackConfig(state_dir=tmp_path, nats_url="nats://127.0.0.1:4222"), say=lambda _: None)
    assert stack._service_env(_engine())["ENGINE_OUTBOX_DIR"] == str(tmp_path.resolve() / "engine-outbox")
    router = Instance("router", "services.router", {}, HealthProbe.NATS, "router")
    assert "ENGINE_OUTBOX_DIR" not in stack._service_env(router)


def test_the_operators_folder_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_OUTBOX_DIR", "/var/lib/autellix/outbox")
    stack = Stack(StackConfig(state_dir=tmp_path, nats_url="nats://127.0.0.1:4222"), say=lambda _: None)
    assert stack._service_env(_engine())["ENGINE_OUTBOX_DIR"] == "/var/lib/autellix/outbox"
