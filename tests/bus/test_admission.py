"""What the bus lets through to a handler, decided without I/O (shared/bus/admission.py)."""

from __future__ import annotations

import msgpack
from hypothesis import given
from hypothesis import strategies as st

from shared.bus.admission import Refusal, admit
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.codec import MESSAGE_TYPES
from shared.protocol.envelope import Decoded, Publisher
from shared.protocol.errors import ErrorCode

_PUBLISHER = Publisher("engine_agent.e0.test")


def _completed(engine_id: str = "e0", program_id: str = "p1") -> m.CallCompleted:
    return m.CallCompleted(call_id="c1", program_id=program_id, engine_id=engine_id, service_s=0.5, wait_s=0.1)


def test_a_well_formed_message_of_a_taken_type_is_admitted():
    body = _completed()
    admitted = admit(subjects.completion("p1", "e0"), _PUBLISHER.encode(body), (m.CallCompleted,))
    assert isinstance(admitted, Decoded)
    assert admitted.body == body and admitted.envelope.type == m.CallCompleted.TYPE


def test_a_type_the_subject_does_not_take_is_refused_by_name():
    data = _PUBLISHER.encode(m.HealthCheck())
    refusal = admit("autellix.anything", data, (m.CallCompleted,))
    assert isinstance(refusal, Refusal)
    assert refusal.code is ErrorCode.BAD_REQUEST
    assert refusal.message_type == m.HealthCheck.TYPE and m.CallCompleted.TYPE in refusal.description


def test_an_engine_subject_refuses_another_engines_completion():
    data = _PUBLISHER.encode(_completed(engine_id="e1"))
    refusal = admit(subjects.completion("p1", "e0"), data, (m.CallCompleted,))
    assert isinstance(refusal, Refusal) and "e1" in refusal.description


def test_a_field_out_of_its_bounds_is_refused():
    data = _PUBLISHER.encode(_completed())
    raw = msgpack.unpackb(data)
    raw["body"]["service_s"] = -1.0
    refusal = admit(subjects.completion("p1", "e0"), msgpack.packb(raw), (m.CallCompleted,))
    assert isinstance(refusal, Refusal) and "service_s" in refusal.description


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_they_decode_to_a_registered_message_or_are_refused(data):
    admitted = admit("autellix.anything", data, ())
    if isinstance(admitted, Decoded):
        assert MESSAGE_TYPES[admitted.envelope.type] is type(admitted.body)
    else:
        assert isinstance(admitted, Refusal) and admitted.description and admitted.code is ErrorCode.BAD_REQUEST
