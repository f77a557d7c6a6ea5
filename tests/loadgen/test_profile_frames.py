"""The profile summary: py-spy's collapsed stacks -> self, per-file and project-inclusive shares."""

from __future__ import annotations

from loadgen.bench.profile_mesh import top_frames

RAW = """\
process 1:"python";main (services/x/main.py:1);serve (services/x/a.py:10);write (asyncio/streams.py:346) 6
main (services/x/main.py:1);serve (services/x/a.py:10);encode (shared/protocol/envelope.py:5) 3
main (services/x/main.py:1);select (selectors.py:468) 1
not a stack line
"""


def test_shares_of_busy_samples():
    p = top_frames(RAW)
    assert p["busy_samples"] == 10
    assert p["self"][0] == {"frame": "write (asyncio/streams.py:346)", "share": 0.6, "samples": 6}
    assert {f["frame"]: f["share"] for f in p["self_by_file"]}["shared/protocol/envelope.py"] == 0.3
    inclusive = {f["frame"]: f["share"] for f in p["inclusive_project"]}
    assert inclusive["main (services/x/main.py:1)"] == 1.0 and inclusive["serve (services/x/a.py:10)"] == 0.9
    assert all("asyncio" not in f for f in inclusive)


def test_collapsed_stacks_drop_pseudo_frames_and_lines_that_are_no_stack():
    from loadgen.bench.profile_mesh import collapsed_stacks

    stacks = list(collapsed_stacks(RAW + "process 2:\"python\";thread 0x1 4\nx y z\n"))
    assert [n for _, n in stacks] == [6, 3, 1]  # a stack of pseudo-frames alone, or no count: skipped
    assert stacks[0][0][0] == "main (services/x/main.py:1)" and stacks[0][0][-1] == "write (asyncio/streams.py:346)"
