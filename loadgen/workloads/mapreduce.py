"""Map-Reduce: fork/join over a document (LangChain-style map-reduce summarisation).

Shape: the program forks one thread per chunk (thread `map<i>`, `parent_thread_id="main"`), each
running one map call over its chunk in parallel; a single reduce call on thread `main` depends on
every map call and reads all their outputs. The paper give the shape only, no
figures, so every number below is an assumption, stated so results can be read against it:
- fan-out: uniform integer in [4, 16] chunks (mean 10, so 11 calls per program on average).
- chunk tokens: log-normal, mean 1500, log-sigma 0.3 (text splitters cut ~1-2K-token chunks).
- map output: log-normal, mean 200 tokens, log-sigma 0.5 (a chunk summary).
- reduce output: log-normal, mean 400 tokens, log-sigma 0.5 (the final summary).
- a 64-token task segment private to the program, shared by its maps and its reduce, after a
  60-token instruction segment shared by all map-reduce programs (`mapreduce:map` /
  `mapreduce:reduce`).
- context: the reduce call's prompt holds every map output (segments `out:<map call id>`).
- no tool pauses (pure LLM fork/join).
"""

from __future__ import annotations

import random

from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.sampling import lognormal_int
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import ToolDelayModel
from shared.core.program import ROOT_THREAD

FANOUT_MIN = 4
FANOUT_MAX = 16
CHUNK_TOKENS_MEAN = 1500
CHUNK_TOKENS_SIGMA = 0.3
MAP_OUTPUT_MEAN = 200
REDUCE_OUTPUT_MEAN = 400
OUTPUT_SIGMA = 0.5
TASK_TOKENS = 64
MAP_INSTRUCTIONS = ("mapreduce:map", 60)
REDUCE_INSTRUCTIONS = ("mapreduce:reduce", 60)


def mapreduce_program(
    program_id: str, rng: random.Random, tools: ToolDelayModel, workload: str = "mapreduce"
) -> ProgramSpec:
    del tools  # no interrupts in a map-reduce program
    builder = ProgramBuilder(program_id, workload)
    fanout = rng.randint(FANOUT_MIN, FANOUT_MAX)
    task = builder.segment("task", TASK_TOKENS)
    maps = []
    for i in range(fanout):
        chunk = builder.segment("chunk", lognormal_int(rng, CHUNK_TOKENS_MEAN, CHUNK_TOKENS_SIGMA, 16, 8192))
        maps.append(
            builder.call(
                (MAP_INSTRUCTIONS, task, chunk),
                lognormal_int(rng, MAP_OUTPUT_MEAN, OUTPUT_SIGMA, 1, 2048),
                thread_id=f"map{i}",
                parent_thread_id=ROOT_THREAD,
            )
        )
    builder.call(
        (REDUCE_INSTRUCTIONS, task) + tuple(builder.output_segment(m) for m in maps),
        lognormal_int(rng, REDUCE_OUTPUT_MEAN, OUTPUT_SIGMA, 1, 4096),
        depends_on=tuple(m.call_id for m in maps),
    )
    return builder.build()
