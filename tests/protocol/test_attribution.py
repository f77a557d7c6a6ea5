"""An engine's subject binds the body's engine (and a completion's program): the pure rule the bus
applies before any handler sees a heartbeat, a queue snapshot or a completion."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.attribution import attribution_problem

ids = st.text(st.sampled_from("abcxyz019-_"), min_size=1, max_size=8)


def _messages(engine_id: str, program_id: str) -> list[tuple[object, str]]:
    """Each engine message naming (engine_id, program_id), and the one subject it belongs on."""
    return [
        (m.EngineHeartbeat(engine_id=engine_id), subjects.engine_heartbeat(engine_id)),
        (m.EngineQueueSnapshot(engine_id=engine_id), subjects.engine_queue(engine_id)),
        (m.CallCompleted(call_id="c", program_id=program_id, engine_id=engine_id, service_s=1.0, wait_s=0.0),
         subjects.completion(program_id, engine_id)),
    ]


@given(ids, ids, ids, ids)
def test_a_body_is_taken_only_on_the_subject_it_names(body_engine, subject_engine, body_program, subject_program):
    bodies = _messages(body_engine, body_program)
    for (body, own), (_, subject) in zip(bodies, _messages(subject_engine, subject_program), strict=True):
        assert attribution_problem(own, body) is None
        same = subject == own
        assert (attribution_problem(subject, body) is None) == same, (subject, body)
    for body, own in bodies:  # a heartbeat is no snapshot: each kind only on its own family
        for other, _ in bodies:
            if type(other) is not type(body):
                assert attribution_problem(own, other) is not None


def test_other_subjects_are_not_its_business_and_the_reason_names_both():
    hb = m.EngineHeartbeat(engine_id="e1")
    assert attribution_problem(subjects.program_service("p"), hb) is None
    assert attribution_problem(subjects.engine_commands("e0"), hb) is None
    reason = attribution_problem(subjects.engine_heartbeat("e0"), hb)
    assert "'e1'" in reason and subjects.engine_heartbeat("e1") in reason and subjects.engine_heartbeat("e0") in reason
    assert "does not belong" in attribution_problem(subjects.engine_heartbeat("e0"), m.HealthCheck())
    bad = m.EngineHeartbeat(engine_id="e.0")  # no subject can carry it: refused everywhere it claims to be
    assert attribution_problem(subjects.engine_heartbeat("e0"), bad) is not None
