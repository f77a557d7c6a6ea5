"""The pure halves of the vLLM scheduler (no vLLM needed): metadata validation, keys, planning."""

from __future__ import annotations

import pytest

from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.program import ROOT_THREAD
from shared.engine.api import DictProgramDirectory
from shared.engine.program_meta import ProgramMeta, parse_program_meta, program_meta_args
from shared.engine.program_sched import ProgramScheduleState, SchedulerSettings


def test_no_metadata_is_a_one_call_program():
    assert parse_program_meta(None, "r1") == ProgramMeta("r1")
    assert parse_program_meta({}, "r1") == ProgramMeta("r1")


def test_round_trip_of_client_args():
    args = program_meta_args("p", "t2", program_arrival_s=1.5, seq=3)
    assert parse_program_meta(args, "r") == ProgramMeta("p", "t2", 1.5, 0.0, 3)
    assert parse_program_meta({"autellix": {"program_id": "p"}}, "r").thread_id == ROOT_THREAD


def test_flat_xargs_and_vllms_own_keys():
    from shared.engine.program_meta import flat_program_args

    args = flat_program_args("p", "t", "c1", seq=4)
    assert args["autellix_program_id"] == "p"
    assert parse_program_meta({**args, "kv_transfer_params": {"x": 1}}, "r") == ProgramMeta("p", "t", None, 0.0, 4, "c1")
    assert parse_program_meta({"kv_transfer_params": {}}, "r") == ProgramMeta("r")  # vLLM's keys only


@pytest.mark.parametrize("bad", [[1], "x", {"autellix": {"program_id": ""}},
                                 {"autellix": {"program_id": "p", "oracle_remaining_s": float("nan")}},
                                 {"autellix": {"program_id": "p", "seq": True}}])
def test_malformed_metadata_raises_value_error(bad):
    with pytest.raises(ValueError, match="request r"):
        parse_program_meta(bad, "r")


def test_settings_round_trip():
    s = SchedulerSettings.from_config({"policy": "atlas", "beta": None, "num_levels": 4})
    assert s.policy.name is PolicyName.ATLAS and s.starvation.beta is None and s.policy.mlfq.num_levels == 4
    assert SchedulerSettings.from_config(s.to_config()) == s


def test_levels_inherit_and_demote():
    d = DictProgramDirectory()
    d.ledger("A").service_s = 3.0  # level 2 under the default MLFQ (thresholds 1, 2, 4, ...)
    st = ProgramScheduleState(SchedulerSettings(SchedulingPolicy(PolicyName.PLAS)), d)
    c = st.admit("a1", ProgramMeta("A"), 0.0, 10, 0.0)
    assert c.level == 2 and c.next_change_s == pytest.approx(1.0)
    assert st.charge(["a1"], 0.5) == [] and st.charge(["a1"], 0.6) == [c] and c.level == 3


def test_plan_only_for_strictly_better_class():
    d = DictProgramDirectory()
    d.ledger("A").service_s = 5.0
    st = ProgramScheduleState(SchedulerSettings(SchedulingPolicy(PolicyName.PLAS)), d)
    a = st.admit("a", ProgramMeta("A"), 0.0, 10, 0.0)
    b = st.admit("b", ProgramMeta("B"), 1.0, 10, 1.0)
    b2 = st.admit("b2", ProgramMeta("B"), 2.0, 10, 2.0)
    assert [p.victim for p in st.plan_for_slots([b, b2], [a])] == ["a"]
    assert st.plan_for_slots([a], [b]) == [] and st.plan_for_kv(b2, [b]) is None


def test_segment_tokens_are_deterministic_and_prefix_stable():
    from shared.engine.vllm_emulated import SegmentTokens

    a, b = SegmentTokens(max_segments=2), SegmentTokens()
    short = a.tokens("out:c1", 10).tolist()
    assert a.tokens("out:c1", 500).tolist()[:10] == short  # a growing output keeps its prefix
    a.tokens("x", 5), a.tokens("y", 5)  # evicts out:c1 from the small memo
    assert a.tokens("out:c1", 10).tolist() == short == b.tokens("out:c1", 10).tolist()
    assert b.prompt((("s", 3), ("t", 2))) == b.tokens("s", 3).tolist() + b.tokens("t", 2).tolist()
    assert b.tokens("s", 16).tolist() != b.tokens("t", 16).tolist()
