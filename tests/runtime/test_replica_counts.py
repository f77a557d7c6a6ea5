"""`autellix up --api-workers N --routers M`: the plan's instances, and workers sharing one port."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from runtime.catalog import StackOptions, plan, with_own_port
from runtime.metrics_targets import MetricsPorts
from runtime.ports import free_port
from services.session_api.settings import SessionApiSettings
from services.session_api.shared_port import reuse_port_socket


def test_workers_and_routers_become_instances_on_one_port():
    instances, _ = plan(StackOptions(api_workers=3, routers=2, port=9100))
    names = [i.name for i in instances]
    assert [n for n in names if n.startswith("router")] == ["router-0", "router-1"]
    api = [i for i in instances if i.module == "services.session_api"]
    assert [i.name for i in api] == ["session_api-0", "session_api-1", "session_api-2"]
    assert {i.env["API_PORT"] for i in api} == {"9100"} and all(i.env["API_REUSE_PORT"] == "true" for i in api)
    assert names[-3:] == [i.name for i in api]  # the front door still starts last
    # each worker is probed and scraped on a port of its own, given as it starts
    own = [with_own_port(i, "127.0.0.1", 9200 + n) for n, i in enumerate(api)]
    assert [i.env["API_WORKER_PORT"] for i in own] == ["9200", "9201", "9202"]
    assert [i.probe_target for i in own] == [f"http://127.0.0.1:{9200 + n}/healthz" for n in range(3)]
    metrics = MetricsPorts(StackOptions(api_workers=3, port=9100))
    for inst in own:
        metrics.env_for(inst)
    assert [metrics.by_instance[i.name] for i in own] == [f"127.0.0.1:{9200 + n}" for n in range(3)]


def test_a_worker_port_needs_the_shared_port():
    with pytest.raises(ValidationError, match="API_WORKER_PORT"):
        SessionApiSettings(api_worker_port=9101, api_port=9100)
    with pytest.raises(ValidationError, match="API_WORKER_PORT"):
        SessionApiSettings(api_worker_port=9100, api_port=9100, api_reuse_port=True)
    assert SessionApiSettings(api_worker_port=9101, api_port=9100, api_reuse_port=True).api_worker_port == 9101


def test_one_of_each_keeps_the_plain_names():
    instances, _ = plan(StackOptions())
    assert {"router", "session_api"} <= {i.name for i in instances}
    api = next(i for i in instances if i.name == "session_api")
    assert "API_REUSE_PORT" not in api.env and "API_WORKER_PORT" not in api.env


@pytest.mark.parametrize(("options", "flag"), [(StackOptions(api_workers=0), "--api-workers"),
                                                (StackOptions(routers=65), "--routers")])
def test_bad_counts_name_their_flag(options, flag):
    with pytest.raises(ValueError, match=flag):
        plan(options)


def test_two_workers_bind_one_port():
    port = free_port()
    first, second = reuse_port_socket("127.0.0.1", port), reuse_port_socket("127.0.0.1", port)
    try:
        for sock in (first, second):
            sock.listen()
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        first.close()
        second.close()
