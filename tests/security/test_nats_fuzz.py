"""The NATS fuzzer at a small scale (loadgen/fuzz/nats_fuzz.py; the run of thousands of messages is
recorded in docs/results/fuzz/): on a mesh of its own (own NATS with the role permissions, own
PostgreSQL), malformed, out-of-range and forged msgpack on every subject the mesh listens on, from
no credentials, the wrong roles and the right ones, changes no table and stops no consumer."""

from __future__ import annotations

import pytest

from loadgen.chaos.fuzz_api import FUZZ_ENV
from loadgen.chaos.stack import ChaosStack
from loadgen.fuzz.nats_fuzz import fuzz_nats, mesh_of
from loadgen.fuzz.payloads import MISATTRIBUTED, OUT_OF_RANGE

pytestmark = pytest.mark.timeout(240)


async def test_fuzzed_mesh_changes_nothing_and_keeps_consuming():
    stack = await ChaosStack(engines=2, extra_env=FUZZ_ENV).up()
    try:
        await stack.wait_ready(60)
        result = await fuzz_nats(mesh_of(stack), seed=1, variants=1)
    finally:
        stack.down()
    brief = {k: v for k, v in result.items() if k != "right_role_rows"}
    assert all(u["refused"] for u in result["unauthenticated"]), brief["unauthenticated"]
    assert result["wrong_role_not_refused"] == 0, brief["wrong_role"]
    assert all(w["reached_a_consumer"] == 0 for w in result["wrong_role"]), brief["wrong_role"]
    assert result["right_role_sent"] > 0 and result["messages_sent"] > 500, brief
    assert result["num_state_changes"] == 0, result["state_changes"]
    assert result["num_crashed_consumers"] == 0, brief
    # every consumer refuses an out-of-range field at decoding, and an engine's message naming
    # another engine than its subject, and says so on errors.<service>
    silent = {service: {kind: rows for kind, rows in kinds.items() if kind in (*OUT_OF_RANGE, *MISATTRIBUTED)}
              for service, kinds in result["right_role_taken_silently"].items()}
    assert not any(silent.values()), silent
