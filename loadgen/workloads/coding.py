"""Coding agent: a SWE-bench-style ReAct loop whose context grows to tens of K tokens (issue 6).

One thread; each step is one LLM call (thought + action) followed by one tool run whose result is
appended to the context, so call k's prompt = system + task + every earlier (output, observation)
pair. The tool run before call k is `CallSpec.tool` of call k, its pause `delay_s`.

Figures and where they come from (the SAGA paper unless marked assumption):
- steps (calls) per program: log-normal, mean 37, at most 150 ("SWE-bench, mean 37 / max 150
  steps"); log-sigma 0.6 and a floor of 3 are assumptions. Clamping makes the mean a little lower.
- context: 2-4K tokens at the start growing to 16-128K ("2-4K -> 16-128K tokens"): a 2,500-token
  system prompt with the tool docs shared by all coding programs (`coding:system`, assumption)
  plus the issue text (log-normal mean 800, log-sigma 0.6, assumption); the observation sizes
  below (assumptions) make a 37-step task end near 30K and a 150-step one near the 128K window,
  where the program stops (`limits.MAX_CONTEXT_TOKENS`).
- output per call: log-normal mean 150 tokens, log-sigma 0.6 (assumption: a thought and a command).
- tools, chosen by a first-order Markov chain (assumption; it mimics explore -> edit -> test ->
  fix loops, the retry back-edges of SAGA's Fig. 3), with observation sizes (log-normal means,
  assumptions) and pause medians:
    read_file   1000 tokens  45 ms  (SAGA Fig. 3: 45 ms for read_file)
    run_test     700 tokens  2.4 s  (SAGA Fig. 3: 2.4 s for run_test)
    search       400 tokens  0.2 s  (assumption)
    edit_file    150 tokens  50 ms  (assumption)
    list_dir     200 tokens  30 ms  (assumption)
  Pauses are log-normal around those medians with log-sigma 1.0 (CV 1.31, inside the production
  CV 1.0-1.5 SAGA reports): heavy-tailed, tens of ms to seconds. They are on by default for this
  workload (`tool_delays=False` zeroes them).
"""

from __future__ import annotations

import random

from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.limits import MAX_CONTEXT_TOKENS
from loadgen.workloads.sampling import lognormal_int
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import PROFILED_SIGMA, ToolDelayModel, ToolProfile

STEPS_MEAN = 37
STEPS_SIGMA = 0.6
STEPS_MIN = 3
STEPS_MAX = 150
SYSTEM_SEGMENT = ("coding:system", 2500)
TASK_TOKENS_MEAN = 800
TASK_TOKENS_SIGMA = 0.6
OUTPUT_TOKENS_MEAN = 150
OUTPUT_TOKENS_SIGMA = 0.6
OBSERVATION_SIGMA = 0.8
# tool -> (observation tokens mean, pause median s)
TOOLS = {
    "read_file": (1000, 0.045),
    "run_test": (700, 2.4),
    "search": (400, 0.2),
    "edit_file": (150, 0.05),
    "list_dir": (200, 0.03),
}
FIRST_TOOL = {"list_dir": 0.4, "search": 0.4, "read_file": 0.2}
NEXT_TOOL = {
    "list_dir": {"read_file": 0.5, "search": 0.3, "list_dir": 0.2},
    "search": {"read_file": 0.6, "search": 0.3, "edit_file": 0.1},
    "read_file": {"read_file": 0.3, "search": 0.2, "edit_file": 0.4, "run_test": 0.1},
    "edit_file": {"run_test": 0.5, "edit_file": 0.2, "read_file": 0.3},
    "run_test": {"edit_file": 0.5, "read_file": 0.4, "run_test": 0.1},
}
TOOL_PROFILES = {name: ToolProfile(median_s, PROFILED_SIGMA) for name, (_, median_s) in TOOLS.items()}


def _choose(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def coding_program(
    program_id: str, rng: random.Random, tools: ToolDelayModel, workload: str = "coding"
) -> ProgramSpec:
    builder = ProgramBuilder(program_id, workload)
    delays = ToolDelayModel(tools.enabled, {**TOOL_PROFILES, **tools.profiles})
    steps = lognormal_int(rng, STEPS_MEAN, STEPS_SIGMA, STEPS_MIN, STEPS_MAX)
    task = builder.segment("task", lognormal_int(rng, TASK_TOKENS_MEAN, TASK_TOKENS_SIGMA, 50, 16384))
    history: tuple = (SYSTEM_SEGMENT, task)
    context_tokens = SYSTEM_SEGMENT[1] + task[1]
    previous = None
    tool = None
    for step in range(steps):
        new: tuple = ()
        if previous is not None:
            tool = _choose(rng, FIRST_TOOL if step == 1 else NEXT_TOOL[tool])
            new = (builder.segment(tool, lognormal_int(rng, TOOLS[tool][0], OBSERVATION_SIGMA, 1, 32768)),)
        output_tokens = lognormal_int(rng, OUTPUT_TOKENS_MEAN, OUTPUT_TOKENS_SIGMA, 1, 4096)
        delay_s = delays.delay_s(rng, tool) if tool else 0.0
        added = sum(n for _, n in new)
        if context_tokens + added + output_tokens > MAX_CONTEXT_TOKENS:
            break
        prompt = history + new
        spec = builder.call(
            prompt,
            output_tokens,
            depends_on=(previous.call_id,) if previous else (),
            delay_s=delay_s,
            tool=tool,
        )
        history = prompt + (builder.output_segment(spec),)
        context_tokens += added + output_tokens
        previous = spec
    return builder.build()
