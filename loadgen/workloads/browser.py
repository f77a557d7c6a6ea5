"""Browser agent: a WebArena-style web task, one thread, a fresh page observation each step.

Call k's prompt = system + task + the agent's earlier actions (outputs of calls 0..k-1) + the
*current* page's accessibility tree only (earlier pages are dropped, as WebArena agents do), so
consecutive calls share the prefix up to the previous action and re-prefill the last action and
the new page: a different reuse pattern from the coding agent's ever-growing context.

Figures and where they come from:
- steps per program: log-normal, mean 18 (the SAGA paper: "WebArena, mean 18 steps"),
  log-sigma 0.5 (assumption), between 2 and 30 (WebArena's step limit of 30, assumption).
- system prompt with instructions and examples: 1,500 tokens shared by all browser programs
  (`browser:system`, assumption); task intent: log-normal mean 60 tokens (assumption).
- page observation: log-normal mean 3,000 tokens, log-sigma 0.5, at most 16K (assumption: an
  accessibility tree truncated to a few thousand tokens).
- output per call: log-normal mean 120 tokens, log-sigma 0.5 (assumption: reasoning + action).
- tool before each call after the first = the previous action (assumption: click 50%, type 20%,
  scroll 20%, goto 10%), pause medians click 0.8 s, type 0.3 s, scroll 0.2 s, goto 1.5 s
  (page loads; assumptions), log-sigma 1.0 (CV 1.31, SAGA's production CV 1.0-1.5). On by default.
"""

from __future__ import annotations

import random

from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.sampling import lognormal_int
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import PROFILED_SIGMA, ToolDelayModel, ToolProfile

STEPS_MEAN = 18
STEPS_SIGMA = 0.5
STEPS_MIN = 2
STEPS_MAX = 30
SYSTEM_SEGMENT = ("browser:system", 1500)
TASK_TOKENS_MEAN = 60
PAGE_TOKENS_MEAN = 3000
PAGE_TOKENS_SIGMA = 0.5
OUTPUT_TOKENS_MEAN = 120
OUTPUT_TOKENS_SIGMA = 0.5
ACTIONS = {"click": (0.5, 0.8), "type": (0.2, 0.3), "scroll": (0.2, 0.2), "goto": (0.1, 1.5)}  # weight, pause median s
TOOL_PROFILES = {name: ToolProfile(median_s, PROFILED_SIGMA) for name, (_, median_s) in ACTIONS.items()}


def browser_program(
    program_id: str, rng: random.Random, tools: ToolDelayModel, workload: str = "browser"
) -> ProgramSpec:
    builder = ProgramBuilder(program_id, workload)
    delays = ToolDelayModel(tools.enabled, {**TOOL_PROFILES, **tools.profiles})
    steps = lognormal_int(rng, STEPS_MEAN, STEPS_SIGMA, STEPS_MIN, STEPS_MAX)
    task = builder.segment("task", lognormal_int(rng, TASK_TOKENS_MEAN, 0.5, 5, 1024))
    actions: tuple = ()
    previous = None
    for step in range(steps):
        tool = rng.choices(list(ACTIONS), weights=[w for w, _ in ACTIONS.values()])[0] if step else None
        page = builder.segment("page", lognormal_int(rng, PAGE_TOKENS_MEAN, PAGE_TOKENS_SIGMA, 100, 16384))
        spec = builder.call(
            (SYSTEM_SEGMENT, task) + actions + (page,),
            lognormal_int(rng, OUTPUT_TOKENS_MEAN, OUTPUT_TOKENS_SIGMA, 1, 2048),
            depends_on=(previous.call_id,) if previous else (),
            delay_s=delays.delay_s(rng, tool) if tool else 0.0,
            tool=tool,
        )
        actions += (builder.output_segment(spec),)
        previous = spec
    return builder.build()
