"""The service catalog is data: installed services are planned, missing ones skipped."""

import pytest

from runtime.catalog import SERVICES, HealthProbe, ServiceSpec, StackOptions, plan


def test_plan_expands_engines_and_skips_missing_packages():
    services = SERVICES + (ServiceSpec("ghost", "services.ghost_service", HealthProbe.NATS),)
    instances, skipped = plan(StackOptions(engines=3, backend="emulated", port=9000), services)
    assert "ghost" in skipped
    installed = {s.name for s in SERVICES if s.installed()}
    assert {i.module.rsplit(".", 1)[1] for i in instances} == installed
    if "engine_agent" in installed:
        engines = [i for i in instances if i.module == "services.engine_agent"]
        assert [i.env["ENGINE_ID"] for i in engines] == ["e0", "e1", "e2"]
        assert all(i.env["ENGINE_BACKEND"] == "emulated" for i in engines)
    if "session_api" in installed:
        api = next(i for i in instances if i.name == "session_api")
        assert api.env["API_PORT"] == "9000" and api.probe_target == "http://127.0.0.1:9000/healthz"


def test_only_restricts_the_plan():
    instances, _ = plan(StackOptions(only=("router",)))
    assert [i.name for i in instances] in ([], ["router"])


def test_an_api_without_engines_is_probed_for_liveness_only():
    """/healthz is 503 until an engine heartbeats: a stack without engines waits for /livez."""
    instances, _ = plan(StackOptions(only=("session_api",), port=9001))
    assert [i.probe_target for i in instances] in ([], ["http://127.0.0.1:9001/livez"])


@pytest.mark.parametrize("opts, message", [
    (StackOptions(backend="gpu"), "--backend"),
    (StackOptions(engines=0), "--engines"),
    (StackOptions(port=70000), "--port"),
    (StackOptions(only=("nope",)), "unknown service"),
])
def test_bad_options(opts, message):
    with pytest.raises(ValueError, match=message):
        plan(opts)
