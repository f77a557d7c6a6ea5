"""Agentic programs as DAGs of LLM calls, revealed to the serving system at run time.

A driver (offline simulator or live load generator) submits a call only when every call it
depends on has finished, after the call's tool/interrupt delay.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.engine.api import Segment


@dataclass(frozen=True)
class CallSpec:
    call_id: str  # unique within a run, e.g. "p17/c3"
    thread_id: str  # "main" for single-thread programs
    parent_thread_id: str | None  # set on the first call of a forked thread (ATLAS fork point)
    depends_on: tuple[str, ...]  # call ids that must finish before this call is submitted
    delay_s: float  # tool / human interrupt time after the last dependency finished
    prompt_segments: tuple[Segment, ...]  # full context: shared prefix segments + new tokens
    output_tokens: int  # tokens the call generates (fixed, as in the paper's replay)
    tool: str | None = None  # tool class run before this call (None: plain chat turn)

    @property
    def prompt_tokens(self) -> int:
        return sum(n for _, n in self.prompt_segments)


@dataclass(frozen=True)
class ProgramSpec:
    program_id: str
    workload: str
    calls: tuple[CallSpec, ...]  # in a topological order
    arrival_s: float = 0.0
    tenant: str = "default"

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.calls)

    @property
    def num_threads(self) -> int:
        return len({c.thread_id for c in self.calls})
