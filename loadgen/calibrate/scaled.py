"""A workload's programs with every token count divided by one factor (rounded up, at least 1).

The paper's programs (thousands of output tokens each) take hours on a CPU engine; dividing every
segment and every output by the same factor keeps each program's shape (calls, forks, shared
prefixes, the ratio of prompt to output) and makes a live run fit in minutes. Both sides of a
live-vs-simulator comparison run the same shrunk programs.
"""

from __future__ import annotations

import dataclasses
import math

from loadgen.workloads.spec import ProgramSpec


def _div(n: int, factor: int) -> int:
    return max(1, math.ceil(n / factor))


def shrink(programs: list[ProgramSpec], factor: int) -> list[ProgramSpec]:
    if factor < 1:
        raise ValueError(f"token scale factor must be >= 1, got {factor}")
    if factor == 1:
        return programs
    out = []
    for p in programs:
        calls = tuple(dataclasses.replace(c, output_tokens=_div(c.output_tokens, factor),
                                          prompt_segments=tuple((s, _div(n, factor)) for s, n in c.prompt_segments))
                      for c in p.calls)
        out.append(dataclasses.replace(p, calls=calls))
    return out
