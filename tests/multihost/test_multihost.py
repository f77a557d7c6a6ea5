"""The mesh across six hosts made by the test itself (network namespaces inside `unshare -r -n -m`):
a 3-node NATS cluster with the streams at R3, two engine hosts, the control services on a sixth.
Mid-load the link of the node leading the completions stream is cut and an engine host's agent is
killed (loadgen/multihost). Skipped only where the kernel refuses the namespaces.

Asserted: what the mesh guarantees today (nothing counted twice, no non-retryable error, the audit
stream writable through the surviving nodes and holding every applied call's placement, the mesh
serving again after both faults, the cut node catching up). The issue's targets (0 completions
lost, p99 recovery under 5 s) are checked in `test_targets`, expected to fail for the reasons
docs/multihost.md gives; docs/results/multihost/ has the measured numbers."""

from __future__ import annotations

import pytest

from loadgen.multihost.netns import NamespacesRefused, probe_namespaces

RECOVERY_TARGET_S = 5.0
# the audit stream takes writes again within this: when the cut node led it, a new leader is
# elected first (4-7 s measured here, NATS's own Raft timing); otherwise it never stops
AUDIT_WRITABLE_WITHIN_S = 15.0


@pytest.fixture(scope="module")
def result(postgres_server, _migrated_template) -> dict:
    try:
        probe_namespaces()
    except NamespacesRefused as exc:
        pytest.skip(reason=f"no network namespaces here: {exc}")
    from loadgen.multihost.run import run

    return run(postgres_url=postgres_server.create_database(template=_migrated_template))


def test_streams_are_replicated_on_the_three_nodes(result):
    for name, stream in result["streams"]["before"].items():
        assert stream["replicas"] == 3, name
        assert stream["leader"] and len(stream["peers"]) == 2, (name, stream)


def test_engines_are_named_after_their_hosts(result):
    assert result["engines_seen"] == ["engine-a", "engine-b"]  # ENGINE_ID unset on both hosts


def test_nothing_is_counted_twice_and_no_call_fails_for_good(result):
    assert result["double_counted"] == 0, result["mismatches"]
    assert result["calls"]["failed_other"] == 0, result["calls"]["errors_seen"]
    assert result["lost_detail"]["calls_given_up"] == 0


def test_the_audit_stream_stays_writable_and_intact(result):
    cut = result["faults"][0]["host"]
    survivors = {node: s for node, s in result["audit_stream_outage_s"].items() if node != cut}
    assert len(survivors) == 2
    assert all(outage < AUDIT_WRITABLE_WITHIN_S for outage in survivors.values()), survivors
    assert result["audit_stream"]["db_calls_without_routed_event"] == 0
    caught_up = result["streams"]["after_restore"]
    assert all(p["current"] for s in ("AUTELLIX_AUDIT", "AUTELLIX_COMPLETIONS") for p in caught_up[s]["peers"])


def test_the_mesh_serves_again_after_both_faults(result):
    kill_at = result["faults"][1]["at_s"]
    after = [t for t in result["timings"] if t["start"] > kill_at + RECOVERY_TARGET_S]
    assert after and all(t["completed"] for t in after)


@pytest.mark.xfail(reason="known gaps (docs/multihost.md): an engine publishes its completion after the "
                          "answer's end, so one killed while the completions stream elects a leader loses "
                          "it; a call sent into a connection that went stale is not re-sent", strict=False)
def test_targets(result):
    assert result["lost"] == 0, result["lost_detail"]
    assert result["lost_engine"]["placed_there_never_completed"] == 0 or \
        result["lost_engine"]["redispatched_and_completed_elsewhere"] > 0
    assert result["recovery"]["p99_s"] < RECOVERY_TARGET_S, result["recovery"]
