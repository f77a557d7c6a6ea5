"""Hand-built programs for scenario tests (chains and a fork/join)."""

from __future__ import annotations

from loadgen.workloads.spec import CallSpec, ProgramSpec


def chain(pid: str, outputs: list[int], prompt_tokens: int = 64, delay_s: float = 0.0) -> ProgramSpec:
    """A single-thread program: each call sees the whole history (earlier prompts and outputs)."""
    calls = []
    history: tuple = ()
    for i, out in enumerate(outputs):
        cid = f"{pid}/c{i}"
        segs = history + ((f"{pid}/in{i}", prompt_tokens),)
        calls.append(CallSpec(cid, "main", None, (f"{pid}/c{i - 1}",) if i else (), delay_s if i else 0.0,
                              segs, out))
        history = segs + ((f"out:{cid}", out),)
    return ProgramSpec(pid, "chain", tuple(calls))


def fork_join(pid: str, branch_outputs: list[int], root_output: int = 8, join_output: int = 8,
              prompt_tokens: int = 64) -> ProgramSpec:
    """root -> one thread per branch -> join (map-reduce shape)."""
    root = CallSpec(f"{pid}/root", "main", None, (), 0.0, ((f"{pid}/sys", prompt_tokens),), root_output)
    calls = [root]
    for b, out in enumerate(branch_outputs):
        calls.append(CallSpec(f"{pid}/b{b}", f"t{b}", "main", (root.call_id,), 0.0,
                              ((f"{pid}/sys", prompt_tokens), (f"{pid}/map{b}", 32)), out))
    join_segs = ((f"{pid}/sys", prompt_tokens),) + tuple((f"out:{pid}/b{b}", o) for b, o in enumerate(branch_outputs))
    calls.append(CallSpec(f"{pid}/join", "main", None, tuple(c.call_id for c in calls[1:]), 0.0,
                          join_segs, join_output))
    return ProgramSpec(pid, "forkjoin", tuple(calls))
