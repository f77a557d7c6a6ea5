"""Subjects come from one module; ids that would break a subject are refused."""

import pathlib
import re

import pytest

from shared.protocol import messages as m
from shared.protocol import subjects

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_event_subjects_carry_program_and_type():
    done = m.CallCompleted(call_id="c", program_id="p1", engine_id="e", service_s=1.0, wait_s=0.0)
    assert subjects.event(done) == "autellix.events.p1.call.completed"
    assert subjects.event(m.SessionOpened(session_id="s1", tenant="t")) == "autellix.events.s1.session.opened"
    assert subjects.events_of_type(m.CallCompleted) == "autellix.events.*.call.completed"
    assert subjects.events_of_program("p1") == "autellix.events.p1.>"


def test_non_audit_messages_have_no_event_subject():
    with pytest.raises(ValueError):
        subjects.event(m.EngineHeartbeat(engine_id="e"))


@pytest.mark.parametrize("bad", ["", "a.b", "a b", "a*", "x>"])
def test_bad_ids_are_refused(bad):
    with pytest.raises(ValueError):
        subjects.tokens(bad)


def test_no_subject_literal_outside_the_subjects_module():
    """Any "autellix.<word>." string outside subjects.py is a hand-typed subject (Dynamo's drift)."""
    pattern = re.compile(r"""["']autellix\.(cmd|events|tokens|hb|state|errors)\b""")
    offenders = []
    for folder in ("shared", "services", "loadgen", "autellix"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "subjects.py" and path.parent.name == "protocol":
                continue
            if pattern.search(path.read_text()):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
