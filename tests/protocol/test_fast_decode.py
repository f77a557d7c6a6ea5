"""The compiled fast path (`FastDecoder`) never disagrees with the codec: whatever it accepts, the
codec accepts with the same message; whatever else it hands back to the caller (None)."""

import dataclasses

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.protocol import Publisher, decode
from shared.protocol import messages as m
from shared.protocol.codec import to_map
from shared.protocol.envelope import FastDecoder
from shared.protocol.errors import ProtocolError

FAST = FastDecoder(m.CallCompleted)

_VALID_BODY = {"call_id": "c1", "program_id": "p1", "engine_id": "e0", "service_s": 1.5, "wait_s": 0.25,
               "thread_id": "t1", "parent_thread_id": "main", "tenant": "acme", "prompt_tokens": 10,
               "thread_service_at_submit_s": 0.5, "submit_epoch": 2, "completed_at_ns": 17}
_VALID_ENVELOPE = {"schema_version": 1, "type": "call.completed", "publisher_id": "engine_agent.x",
                   "seq": 3, "sent_at_ns": 5}

# values of every wire type, including the near misses (bool for int, int for float, bytes for str)
_INT = st.integers(-(2**63), 2**64 - 1)  # what msgpack can carry
_ANY = st.one_of(st.none(), st.booleans(), _INT, st.floats(allow_nan=False), st.text(max_size=8),
                 st.binary(max_size=4), st.lists(_INT, max_size=2), st.dictionaries(st.text(max_size=3), _INT, max_size=2))
_FIELD_NAMES = [f.name for f in dataclasses.fields(m.CallCompleted)] + ["unknown_field"]


def _same(fast, slow) -> bool:
    """Equal envelopes and bodies (compared as packed maps: exact types, NaN-safe)."""
    return (fast.envelope == slow.envelope
            and msgpack.packb(to_map(fast.body)) == msgpack.packb(to_map(slow.body)))


def _check(data: bytes) -> None:
    fast = FAST.try_decode(data)
    if fast is None:
        return  # the caller falls back to the codec: always safe
    try:
        slow = decode(data)
    except ProtocolError as exc:
        pytest.fail(f"the fast path accepted what the codec rejects ({exc})")
    assert _same(fast, slow)


def test_a_published_completion_takes_the_fast_path_and_matches():
    data = Publisher("engine_agent.x").encode(m.CallCompleted(**_VALID_BODY))
    fast = FAST.try_decode(data)
    assert fast is not None and _same(fast, decode(data))


def test_other_types_and_versions_are_left_to_the_codec():
    pub = Publisher("p")
    assert FAST.try_decode(pub.encode(m.ProgramPromoted(program_id="p", epoch=1, ratio=2.0))) is None
    assert FAST.try_decode(msgpack.packb({**_VALID_ENVELOPE, "schema_version": 2, "body": _VALID_BODY})) is None
    assert FAST.try_decode(msgpack.packb({**_VALID_ENVELOPE, "seq": -1, "body": _VALID_BODY})) is None
    assert FAST.try_decode(b"\xc1 not msgpack") is None
    assert FAST.try_decode(msgpack.packb({**_VALID_ENVELOPE, "body": _VALID_BODY}) + b"\x00") is None


def test_only_registered_message_types():
    with pytest.raises(TypeError):
        FastDecoder(dict)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(_FIELD_NAMES), _ANY, max_size=6))
def test_any_body_the_fast_path_accepts_equals_the_codec(changes):
    _check(msgpack.packb({**_VALID_ENVELOPE, "body": {**_VALID_BODY, **changes}}, use_bin_type=True))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from([*_VALID_ENVELOPE, "body"]), _ANY, max_size=3),
       st.sets(st.sampled_from([*_VALID_ENVELOPE, "body"]), max_size=2))
def test_any_envelope_the_fast_path_accepts_equals_the_codec(changes, removed):
    envelope = {**_VALID_ENVELOPE, "body": _VALID_BODY, **changes}
    for name in removed:
        envelope.pop(name, None)
    _check(msgpack.packb(envelope, use_bin_type=True))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_never_pass_the_fast_path_wrongly(data):
    _check(data)
