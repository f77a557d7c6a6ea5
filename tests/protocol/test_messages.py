"""Contract tests: every message round-trips; golden bytes pin the wire format; bad input is refused."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.protocol import ProtocolError, decode, encode
from shared.protocol import messages as m
from shared.protocol.codec import MESSAGE_TYPES

ROUTE = m.RouteCall(call_id="c1", program_id="p1", thread_id="t2", parent_thread_id="main", tenant="acme",
                    prompt_text="hi", prompt_token_ids=[1, 2, 3], prompt_tokens=3,
                    prompt_segments=[("sys", 2), ("u1", 1)], max_tokens=16, stream=True,
                    reply_subject="autellix.tokens.c1", submitted_at_ns=5, next_tool="run_tests",
                    next_tool_idle_s=2.5)

SAMPLES = [
    m.OpenSession(session_id="s1", tenant="acme", name="n", workload_class="react"),
    m.CloseSession(session_id="s1", tenant="acme"),
    m.LookupSession(session_id="s1", tenant="acme"),
    m.SessionOpened(session_id="s1", tenant="acme", opened_at_ns=1),
    m.SessionClosed(session_id="s1", tenant="acme", reason="idle_ttl", closed_at_ns=2),
    m.SessionInfo(session_id="s1", tenant="acme", service_s=1.5, thread_service_s={"main": 1.5},
                  primary_engine="e0", closed_at_ns=None),
    ROUTE,
    m.RunCall(call=ROUTE, engine_id="e0", route_reason="least-loaded", routed_at_ns=9),
    m.CancelCall(call_id="c1"),
    m.CallSubmitted(call_id="c1", program_id="p1", prompt_tokens=3, max_tokens=16),
    m.CallRouted(call_id="c1", program_id="p1", engine_id="e0", reason="locality"),
    m.CallStarted(call_id="c1", program_id="p1", engine_id="e0", wait_s=0.25, level=2, prefix_hit_tokens=16),
    m.CallPreempted(call_id="c1", program_id="p1", engine_id="e0", service_s=0.5, reason="better level"),
    m.CallCompleted(call_id="c1", program_id="p1", engine_id="e0", service_s=1.25, wait_s=0.5, preemptions=1,
                    prompt_tokens=3, output_tokens=16, prefix_hit_tokens=0, thread_service_at_submit_s=2.0,
                    submit_epoch=0),
    m.TokenChunk(call_id="c1", index=0, token_ids=[5, 6], text="ab"),
    m.TokenChunk(call_id="c1", index=1, done=True, finish_reason="length", prompt_tokens=3, output_tokens=2),
    m.ProgramServiceUpdated(program_id="p1", service_s=3.0, wait_s=1.0, epoch=1, thread_service_s={"main": 3.0}),
    m.ProgramPromoted(program_id="p1", epoch=2, ratio=5.5, reason="wait/service >= beta"),
    m.EngineHeartbeat(engine_id="e0", queue_depth=3, running_calls=8, kv_used_blocks=10, kv_total_blocks=100,
                      kv_use=0.1, load=1234.0),
    m.EngineQueueSnapshot(engine_id="e0", taken_at_ns=3, waiting=[
        m.WaitingCall(call_id="c2", program_id="p2", wait_s=1.0, service_s=0.0, level=1)], running_call_ids=["c1"],
        tenant_service_s={"acme": 2.5}),
    m.TenantShares(classes={"acme": 1}, service_s={"acme": 2.5, "beta": 0.5}, half_life_s=30.0, decided_at_ns=9),
    m.AdmitCalls(worker_id="session_api-1", seq=7, tenants=["acme", "acme"], max_in_flight=4096, rate_per_s=5000.0,
                 burst=10000),
    m.CallsAdmitted(refused=["", "rate_limit_exceeded"], retry_after_s=[0.0, 0.25], in_flight=[3, 4]),
    m.LimitUsage(worker_id="session_api-1", released={"acme": 2}, in_flight={"acme": 1}, awaiting=[8]),
    m.ApiPeerNotes(worker_id="session_api-1", outputs=[("seg", "c1")], completed=["p1"], threads=[("p1", "t2")]),
    m.BusReconnected(service="router", publisher_id="router-1"),
    m.ErrorReply(code="not_found", description="no session s9"),
    m.OkReply(),
    m.ErrorRaised(service="router", code="bad_request", description="x", subject="a.b"),
    m.HealthCheck(),
    m.HealthStatus(service="router", instance_id="i"),
]


def test_every_registered_type_has_a_sample():
    assert {type(s).TYPE for s in SAMPLES} == set(MESSAGE_TYPES)


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda s: type(s).TYPE)
def test_round_trip(msg):
    decoded = decode(encode(msg, "pub-1", 7, sent_at_ns=123))
    assert decoded.body == msg
    assert type(decoded.body) is type(msg)
    env = decoded.envelope
    assert (env.schema_version, env.type, env.publisher_id, env.seq, env.sent_at_ns) == (1, msg.TYPE, "pub-1", 7, 123)


GOLDEN_CALL_COMPLETED_V1 = (
    "86ae736368656d615f76657273696f6e01a474797065ae63616c6c2e636f6d706c65746564ac7075626c69736865725f6964"
    "a26530a373657103aa73656e745f61745f6e73cd03e8a4626f6479de0011a763616c6c5f6964a163aa70726f6772616d5f69"
    "64a27031a97468726561645f6964a46d61696eb0706172656e745f7468726561645f6964c0a674656e616e74a0a9656e6769"
    "6e655f6964a26530a9736572766963655f73cb3ff8000000000000a6776169745f73cb3fd0000000000000ab707265656d70"
    "74696f6e7300ad70726f6d70745f746f6b656e7300ad6f75747075745f746f6b656e7300b17072656669785f6869745f746f"
    "6b656e7300b17265636f6d70757465645f746f6b656e7300ba7468726561645f736572766963655f61745f7375626d69745f"
    "73c0ac7375626d69745f65706f6368c0ad66696e6973685f726561736f6ea66c656e677468af636f6d706c657465645f6174"
    "5f6e7300"
)


# the same message since `completed_calls_before` was added: the v1 map plus that one key
GOLDEN_CALL_COMPLETED = (
    GOLDEN_CALL_COMPLETED_V1.replace("de0011", "de0012", 1) + "b6636f6d706c657465645f63616c6c735f6265666f7265c0")


def test_golden_bytes_call_completed():
    """Schema v1 bytes, frozen. Old bytes must decode forever (new fields take their defaults);
    the encoding may only change by adding fields, in which case add the expected hex here."""
    msg = m.CallCompleted(call_id="c", program_id="p1", engine_id="e0", service_s=1.5, wait_s=0.25)
    assert decode(bytes.fromhex(GOLDEN_CALL_COMPLETED_V1)).body == msg
    assert decode(bytes.fromhex(GOLDEN_CALL_COMPLETED)).body == msg
    assert encode(msg, "e0", 3, sent_at_ns=1000).hex() == GOLDEN_CALL_COMPLETED


def test_golden_bytes_heartbeat_is_a_named_map():
    msg = m.EngineHeartbeat(engine_id="e0", queue_depth=2)
    raw = msgpack.unpackb(encode(msg, "e0", 1, sent_at_ns=5))
    assert raw == {"schema_version": 1, "type": "engine.heartbeat", "publisher_id": "e0", "seq": 1,
                   "sent_at_ns": 5, "body": {
                       "engine_id": "e0", "backend": "", "queue_depth": 2, "running_calls": 0,
                       "kv_used_blocks": 0, "kv_total_blocks": 0, "kv_use": 0.0, "load": 0.0,
                       "interval_s": 1.0, "started_at_ns": 0, "model": "", "tokenizer": "",
                       "max_model_len": 0, "draining": False}}


def test_route_call_without_a_tool_hint_decodes_with_none():
    """A RouteCall from a publisher that predates tool hints (issue 6) has no hint fields."""
    raw = msgpack.unpackb(encode(ROUTE, "x", 1, sent_at_ns=1))
    del raw["body"]["next_tool"], raw["body"]["next_tool_idle_s"]
    body = decode(msgpack.packb(raw)).body
    assert body.next_tool is None and body.next_tool_idle_s is None and body.call_id == ROUTE.call_id


def test_older_reader_ignores_new_fields_and_newer_reader_defaults_missing_ones():
    raw = msgpack.unpackb(encode(m.CallRouted(call_id="c", program_id="p", engine_id="e"), "x", 1, sent_at_ns=1))
    raw["body"]["field_from_the_future"] = [1, 2]
    del raw["body"]["reason"]  # written by an older publisher that had no `reason`
    body = decode(msgpack.packb(raw)).body
    assert body == m.CallRouted(call_id="c", program_id="p", engine_id="e", reason="")


def _raw(type_name="call.routed", body=None, **env):
    envelope = {"schema_version": 1, "type": type_name, "publisher_id": "x", "seq": 1, "sent_at_ns": 1,
                "body": body if body is not None else {"call_id": "c", "program_id": "p", "engine_id": "e"}}
    envelope.update(env)
    return msgpack.packb(envelope)


@pytest.mark.parametrize("data, reason", [
    (b"\xc1\xff", "not a msgpack message"),
    (b"", "not a msgpack message"),
    (msgpack.packb([1, 2]), "envelope must be a map"),
    (msgpack.packb({"type": "x"}), "envelope is missing"),
    (_raw(schema_version=2), "unsupported schema_version 2"),
    (_raw(type_name="call.exploded"), "unknown message type 'call.exploded'"),
    (_raw(body={"call_id": "c", "program_id": "p"}), "missing required field 'engine_id'"),
    (_raw(body={"call_id": 5, "program_id": "p", "engine_id": "e"}), "field 'call_id': expected str"),
    (_raw(body=[1]), "expected map"),
    (_raw(seq=-1), "seq and sent_at_ns"),
    (_raw("engine.queue_snapshot", {"engine_id": "e", "waiting": [{"call_id": "c"}]}),
     "missing required field 'waiting[0].program_id'"),
    (_raw("program.service_updated", {"program_id": "p", "service_s": "1", "wait_s": 0.0, "epoch": 0}),
     "field 'service_s': expected float"),
    (_raw("engine.heartbeat", {"engine_id": "e", "queue_depth": True}), "field 'queue_depth': expected int"),
])
def test_bad_bytes_raise_a_clear_protocol_error(data, reason):
    with pytest.raises(ProtocolError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        decode(data)


def test_int_on_the_wire_is_a_valid_float():
    body = decode(_raw("program.service_updated", {"program_id": "p", "service_s": 2, "wait_s": 0, "epoch": 0})).body
    assert body.service_s == 2.0 and isinstance(body.service_s, float)


def test_encode_refuses_unregistered_objects():
    with pytest.raises(TypeError):
        encode({"type": "x"}, "p", 1)


# in the wire bounds (shared/protocol/bounds.py): ids without NUL, epochs in 32 bits
@given(call_id=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20),
       service_s=st.floats(0, 1e6), wait_s=st.floats(0, 1e6),
       epoch=st.none() | st.integers(0, 2**31 - 1), threads=st.dictionaries(st.text(max_size=8), st.floats(0, 1e3)))
def test_round_trip_property(call_id, service_s, wait_s, epoch, threads):
    done = m.CallCompleted(call_id=call_id, program_id="p", engine_id="e", service_s=service_s, wait_s=wait_s,
                           submit_epoch=epoch)
    assert decode(encode(done, "x", 1)).body == done
    upd = m.ProgramServiceUpdated(program_id="p", service_s=service_s, wait_s=wait_s, epoch=0,
                                  thread_service_s=threads)
    assert decode(encode(upd, "x", 1)).body == upd


@given(st.binary(max_size=64))
def test_random_bytes_never_crash_the_decoder(data):
    try:
        decode(data)
    except ProtocolError:
        pass
