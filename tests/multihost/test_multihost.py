"""The mesh across six hosts made by the test itself (network namespaces inside `unshare -r -n -m`):
a 3-node NATS cluster with the streams at R3, two engine hosts, the control services on a sixth.
Mid-load the link of the node leading the completions stream is cut and an engine host's agent is
killed (loadgen/multihost). Skipped only where the kernel refuses the namespaces.

The killed agent is started again on its host after 1 s, as a supervisor would, and replays its
completion outbox. Asserted: nothing lost and nothing counted twice (the issue's targets), no
non-retryable error, the audit stream writable through the surviving nodes and holding every
applied call's placement, the mesh serving again after both faults, the cut node catching up. The
recovery target (p99 under 5 s) is `test_recovery_target`, a non-strict xfail: met in 10 of 10
quiet runs, with little margin above the plan's floor (docs/results/multihost/dec5_lost_requests);
docs/results/multihost/ has every measured run."""

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
    assert result["audit_stream"]["routed_read"]["complete"], result["audit_stream"]["routed_read"]
    assert result["audit_stream"]["db_calls_without_routed_event"] == 0, \
        result["audit_stream"]["calls_without_routed_event"]
    caught_up = result["streams"]["after_restore"]
    assert all(p["current"] for s in ("AUTELLIX_AUDIT", "AUTELLIX_COMPLETIONS") for p in caught_up[s]["peers"])


def test_the_mesh_serves_again_after_both_faults(result):
    kill_at = result["faults"][1]["at_s"]
    after = [t for t in result["timings"] if t["start"] > kill_at + RECOVERY_TARGET_S]
    assert after and all(t["completed"] for t in after)


def test_nothing_is_lost(result):
    """Issue 14's first two targets: a completion the killed engine held unacked (the completions
    stream was electing a leader) is replayed from its outbox by the agent started again on its
    host; an end chunk published into a dead link is sent again after the engine's reconnect."""
    assert result["lost"] == 0, (result["lost_detail"], result["lost_calls"], result["outbox"])
    assert result["double_counted"] == 0, result["mismatches"]


@pytest.mark.xfail(reason="p99 recovery is under 5 s in 10 of 10 quiet runs at 6ae43a9 (max 4.82 s, "
                          "docs/results/multihost/dec5_lost_requests), but the plan's floor (the kill 3 s after the "
                          "cut, then the engine TTL) leaves little margin, and a loaded host adds seconds to every "
                          "phase", strict=False)
def test_recovery_target(result):
    assert result["lost_engine"]["placed_there_never_completed"] == 0 or \
        result["lost_engine"]["placed_again_and_completed"] > 0
    assert result["recovery"]["p99_s"] < RECOVERY_TARGET_S, (result["recovery"], result["hit_calls"][:5])
