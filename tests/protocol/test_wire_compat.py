"""The msgspec codec speaks the wire format the msgpack codec wrote: the same bytes for every
message, and the same verdict on any body (a field of its annotated type, an int for a float,
None where optional, within its bounds: accepted as sent; anything else: a `ProtocolError`)."""

import dataclasses
import math
import typing

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.protocol import ProtocolError, decode, encode
from shared.protocol import messages as m
from shared.protocol.bounds import problem
from shared.protocol.codec import to_map
from tests.protocol.test_messages import SAMPLES


def _packed_by_msgpack(msg, publisher_id: str = "pub", seq: int = 7, sent_at_ns: int = 99) -> bytes:
    return msgpack.packb({"schema_version": 1, "type": msg.TYPE, "publisher_id": publisher_id, "seq": seq,
                          "sent_at_ns": sent_at_ns, "body": to_map(msg)}, use_bin_type=True)


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda s: type(s).TYPE)
def test_every_message_encodes_to_the_bytes_msgpack_wrote(msg):
    assert encode(msg, "pub", 7, sent_at_ns=99) == _packed_by_msgpack(msg)
    assert decode(_packed_by_msgpack(msg)).body == msg


_VALID_BODY = to_map(m.CallCompleted(call_id="c1", program_id="p1", engine_id="e0", service_s=1.5, wait_s=0.25,
                                     thread_id="t1", parent_thread_id="main", tenant="acme", prompt_tokens=10,
                                     thread_service_at_submit_s=0.5, submit_epoch=2, completed_at_ns=17))
_ENVELOPE = {"schema_version": 1, "type": "call.completed", "publisher_id": "engine_agent.x", "seq": 3,
             "sent_at_ns": 5}
_HINTS = typing.get_type_hints(m.CallCompleted)
_INT = st.integers(-(2**63), 2**64 - 1)  # what msgpack can carry
# values of every wire type, including the near misses (bool for int, int for float, bytes for str)
_ANY = st.one_of(st.none(), st.booleans(), _INT, st.floats(), st.text(max_size=8), st.binary(max_size=4),
                 st.lists(_INT, max_size=2), st.dictionaries(st.text(max_size=3), _INT, max_size=2))
_FIELDS = [f.name for f in dataclasses.fields(m.CallCompleted)]


def _acceptable(name: str, value) -> bool:
    """The codec's rule for one flat field of CallCompleted."""
    tp = _HINTS[name]
    optional = typing.get_origin(tp) is not None
    base = next(a for a in typing.get_args(tp) if a is not type(None)) if optional else tp
    if value is None:
        return optional
    if base is float and type(value) is int:
        value = float(value)
    if type(value) is not base:
        return False
    return problem(name, base, value) is None


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from([*_FIELDS, "unknown_field"]), _ANY, max_size=6))
def test_any_body_gets_the_codecs_verdict(changes):
    data = msgpack.packb({**_ENVELOPE, "body": {**_VALID_BODY, **changes}}, use_bin_type=True)
    known = {k: v for k, v in changes.items() if k != "unknown_field"}
    if all(_acceptable(k, v) for k, v in known.items()):
        body = decode(data).body
        for name, value in known.items():
            got = getattr(body, name)
            assert got == value or (isinstance(value, float) and math.isnan(value) and math.isnan(got))
            assert type(got) is (float if type(value) is int and _HINTS[name] in (float, float | None) else type(value))
    else:
        with pytest.raises(ProtocolError):
            decode(data)


def test_trailing_bytes_and_other_versions_are_refused():
    good = msgpack.packb({**_ENVELOPE, "body": _VALID_BODY})
    decode(good)
    with pytest.raises(ProtocolError, match="not a msgpack message"):
        decode(good + b"\x00")
    with pytest.raises(ProtocolError, match="unsupported schema_version 2"):
        decode(msgpack.packb({**_ENVELOPE, "schema_version": 2, "body": _VALID_BODY}))
    with pytest.raises(ProtocolError, match="envelope type and publisher_id must be strings"):
        decode(msgpack.packb({**_ENVELOPE, "type": 5, "body": _VALID_BODY}))


def test_bytes_that_are_not_one_msgpack_value_say_so_before_any_shape_error():
    with pytest.raises(ProtocolError, match="not a msgpack message"):
        decode(b"\x00not msgpack")  # an int, then garbage
