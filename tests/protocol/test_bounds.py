"""Wire bounds (shared/protocol/bounds.py) at decoding: a field that changes state never takes NaN,
infinity, a negative or absurd duration, a count out of 32 bits, or an over-long or NUL id, whoever
sent it; values in range decode as they were sent."""

import math

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.protocol import decode
from shared.protocol import messages as m
from shared.protocol.bounds import MAX_INT, MAX_SECONDS, problem
from shared.protocol.codec import to_map
from shared.protocol.errors import ProtocolError
from shared.protocol.ids import MAX_ID_CHARS

_COMPLETED = m.CallCompleted(call_id="c1", program_id="p1", engine_id="e0", service_s=1.0, wait_s=0.5,
                             thread_service_at_submit_s=0.25, submit_epoch=1)


def _wire(msg, **changes) -> bytes:
    body = {**to_map(msg), **changes}
    return msgpack.packb({"schema_version": 1, "type": msg.TYPE, "publisher_id": "p", "seq": 1, "sent_at_ns": 1,
                          "body": body}, use_bin_type=True)


_BAD = st.sampled_from([math.nan, math.inf, -math.inf, -1e-9, -1.0, MAX_SECONDS * 2, 1e308])


@given(field=st.sampled_from(["service_s", "wait_s", "thread_service_at_submit_s"]), value=_BAD)
def test_a_completion_with_an_out_of_range_duration_is_refused(field, value):
    data = _wire(_COMPLETED, **{field: value})
    with pytest.raises(ProtocolError, match=field):
        decode(data)


@given(value=st.floats(0, MAX_SECONDS), count=st.integers(0, MAX_INT))
def test_values_in_range_decode_unchanged(value, count):
    body = decode(_wire(_COMPLETED, service_s=value, prompt_tokens=count)).body
    assert body.service_s == value and body.prompt_tokens == count


@pytest.mark.parametrize("msg, changes", [
    (m.ProgramPromoted(program_id="p", epoch=1), {"epoch": 2**40}),
    (m.ProgramPromoted(program_id="p", epoch=1), {"ratio": math.nan}),
    (m.ProgramServiceUpdated(program_id="p", service_s=1.0, wait_s=0.0, epoch=0), {"thread_service_s": {"t": math.inf}}),
    (m.EngineHeartbeat(engine_id="e0"), {"queue_depth": -1}),
    (m.EngineHeartbeat(engine_id="e0"), {"started_at_ns": 2**64 - 1}),
    (m.EngineHeartbeat(engine_id="e0"), {"engine_id": "e" * (MAX_ID_CHARS + 1)}),
    (m.CloseSession(session_id="s", tenant="acme"), {"tenant": "a\x00b"}),
    (m.CloseSession(session_id="s", tenant="acme"), {"session_id": ""}),
    (m.CallCompleted(call_id="c", program_id="p", engine_id="e", service_s=1.0, wait_s=0.0), {"program_id": "a.b"}),
])
def test_out_of_range_fields_of_other_messages_are_refused(msg, changes):
    with pytest.raises(ProtocolError, match=next(iter(changes))):
        decode(_wire(msg, **changes))


def test_the_rules_by_name():
    assert problem("load", float, 1e12) is None and problem("load", float, math.inf) and problem("load", float, -1.0)
    assert problem("engine_id", str, "e0") is None and problem("engine_id", str, "a.b") and problem("tenant", str, "a.b") is None
    assert problem("started_at_ns", int, 2**62) is None and problem("epoch", int, 2**31)
    assert problem("name", str, "x" * 10_000) is None and problem("call_id", str, "x" * 10_000)


def test_a_list_or_map_over_max_items_is_refused_and_one_at_the_limit_decodes():
    from shared.protocol.bounds import MAX_ITEMS

    snapshot = m.EngineQueueSnapshot(engine_id="e0")
    with pytest.raises(ProtocolError, match="running_call_ids.*at most"):
        decode(_wire(snapshot, running_call_ids=["c"] * (MAX_ITEMS + 1)))
    with pytest.raises(ProtocolError, match="tenant_service_s.*at most"):
        decode(_wire(snapshot, tenant_service_s={f"t{i}": 1.0 for i in range(MAX_ITEMS + 1)}))
    assert len(decode(_wire(snapshot, running_call_ids=["c"] * MAX_ITEMS)).body.running_call_ids) == MAX_ITEMS
