"""MCTS: LATS-style tree search, a wide tree of parallel threads.

Shape: a root call on thread `main` answers the task. Each iteration then selects one expandable
node of the tree (uniformly among unexpanded nodes above the depth limit) and expands it 5 ways:
five new threads fork from the selected node's thread (`parent_thread_id`), each issuing one call
whose prompt is the selected node's whole trajectory (its prompt and output) plus the environment
observation for its action, shared by the five siblings (LATS samples n children from the same
prompt). `depends_on` holds the tree edge first (the selected node's call) and then every call of
the previous iteration: LATS evaluates and back-propagates an expansion before it selects again.

Figures and where they come from:
- calls per program: 1 + 5 x iterations, mean 159.7 (the Autellix paper and the Agentix (NSDI 2026) analysis:
  "159.7 for LATS"), so iterations are log-normal with mean (159.7 - 1) / 5 = 31.74, log-sigma 0.5
  (assumption; Fig. 11 of the paper calls the distribution long-tailed), at least 1, at most 200.
- 5-way expansion (the paper: "5-way expansion").
- prompt tokens: the paper's 467 is read as the tokens each call adds to its parent's context
  (the task for the root, the observation for a child), log-normal with log-sigma 0.5
  (assumption). The full context a call carries is larger (the trajectory down the tree);
  `autellix workload-stats` reports both.
- output tokens per call: log-normal, mean 73 (the Autellix paper), log-sigma 0.5 (assumption).
- depth limit 7 (assumption, the order of LATS's search depth on HotpotQA).
- tool pauses: tool class `environment` (the action's observation) before each child call; zero
  unless enabled.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.sampling import lognormal_int
from loadgen.workloads.spec import CallSpec, ProgramSpec
from loadgen.workloads.tools import ToolDelayModel
from shared.core.program import ROOT_THREAD
from shared.engine.api import Segment

CALLS_MEAN = 159.7
BRANCHING = 5
ITERATIONS_MEAN = (CALLS_MEAN - 1) / BRANCHING
ITERATIONS_SIGMA = 0.5
ITERATIONS_CAP = 200
NEW_TOKENS_MEAN = 467
NEW_TOKENS_SIGMA = 0.5
OUTPUT_TOKENS_MEAN = 73
OUTPUT_TOKENS_SIGMA = 0.5
MAX_DEPTH = 7
TOOL_CLASS = "environment"


@dataclass
class _Node:
    call: CallSpec
    depth: int
    context: tuple[Segment, ...]  # the call's prompt plus its output


def mcts_program(
    program_id: str, rng: random.Random, tools: ToolDelayModel, workload: str = "mcts"
) -> ProgramSpec:
    builder = ProgramBuilder(program_id, workload)
    iterations = lognormal_int(rng, ITERATIONS_MEAN, ITERATIONS_SIGMA, 1, ITERATIONS_CAP)
    task = builder.segment("task", lognormal_int(rng, NEW_TOKENS_MEAN, NEW_TOKENS_SIGMA, 1, 8192))
    root = builder.call((task,), lognormal_int(rng, OUTPUT_TOKENS_MEAN, OUTPUT_TOKENS_SIGMA, 1, 1024))
    root_node = _Node(root, 0, (task, builder.output_segment(root)))
    expandable = [root_node]
    previous_iteration: list[CallSpec] = [root]
    num_threads = 0
    for _ in range(iterations):
        if not expandable:
            break
        node = expandable.pop(rng.randrange(len(expandable)))
        observation = builder.segment("obs", lognormal_int(rng, NEW_TOKENS_MEAN, NEW_TOKENS_SIGMA, 1, 8192))
        prompt = node.context + (observation,)
        barrier = tuple(c.call_id for c in previous_iteration if c.call_id != node.call.call_id)
        children = []
        for _ in range(BRANCHING):
            num_threads += 1
            child = builder.call(
                prompt,
                lognormal_int(rng, OUTPUT_TOKENS_MEAN, OUTPUT_TOKENS_SIGMA, 1, 1024),
                depends_on=(node.call.call_id,) + barrier,
                thread_id=f"t{num_threads}",
                parent_thread_id=node.call.thread_id or ROOT_THREAD,
                delay_s=tools.delay_s(rng, TOOL_CLASS),
                tool=TOOL_CLASS,
            )
            children.append(child)
            if node.depth + 1 < MAX_DEPTH:
                expandable.append(_Node(child, node.depth + 1, prompt + (builder.output_segment(child),)))
        previous_iteration = children
    return builder.build()
