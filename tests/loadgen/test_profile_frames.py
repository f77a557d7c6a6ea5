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
