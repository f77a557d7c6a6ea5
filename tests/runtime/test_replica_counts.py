"""`autellix up --api-workers N --routers M`: the plan's instances, and workers sharing one port."""

from __future__ import annotations

import socket

import pytest

from services.session_api.shared_port import reuse_port_socket
from shared.runtime.catalog import StackOptions, plan
from shared.runtime.ports import free_port


def test_workers_and_routers_become_instances_on_one_port():
    instances, _ = plan(StackOptions(api_workers=3, routers=2, port=9100))
    names = [i.name for i in instances]
    assert [n for n in names if n.startswith("router")] == ["router-0", "router-1"]
    api = [i for i in instances if i.module == "services.session_api"]
    assert [i.name for i in api] == ["session_api-0", "session_api-1", "session_api-2"]
    assert {i.env["API_PORT"] for i in api} == {"9100"} and all(i.env["API_REUSE_PORT"] == "true" for i in api)
    assert names[-3:] == [i.name for i in api]  # the front door still starts last


def test_one_of_each_keeps_the_plain_names():
    instances, _ = plan(StackOptions())
    assert {"router", "session_api"} <= {i.name for i in instances}
    assert "API_REUSE_PORT" not in next(i for i in instances if i.name == "session_api").env


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
