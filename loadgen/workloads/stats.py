"""Descriptive statistics of generated programs, per call and per program (pure; no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.workloads.spec import ProgramSpec
from shared.stats import percentile


@dataclass(frozen=True)
class Row:
    metric: str
    mean: float
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, metric: str, values: list[float]) -> Row:
        if not values:
            return cls(metric, 0.0, 0.0, 0.0, 0.0)
        return cls(metric, sum(values) / len(values), percentile(values, 50), percentile(values, 99), max(values))


def new_prompt_tokens(program: ProgramSpec) -> list[int]:
    """Per call, prompt tokens of the program's own content absent from the context (prompt +
    output) of the calls it depends on: system prompts and tool schemas shared across programs are
    left out (they stay cached). For a chain this is the turn's new input; for a tree child, the
    observation it adds; it is what a perfect prefix cache would still have to prefill.
    """
    private = f"{program.program_id}:"
    context_ids: dict[str, frozenset[str]] = {}
    out = []
    for call in program.calls:
        known: set[str] = set()
        for dep in call.depends_on:
            known |= context_ids[dep]
        out.append(sum(n for seg, n in call.prompt_segments if seg not in known and seg.startswith(private)))
        context_ids[call.call_id] = frozenset(seg for seg, _ in call.prompt_segments) | {f"out:{call.call_id}"}
    return out


def shared_prompt_tokens(program: ProgramSpec) -> list[int]:
    """Per call, prompt tokens in segments not private to the program (system prompts, schemas)."""
    private = f"{program.program_id}:"
    return [sum(n for seg, n in c.prompt_segments if not seg.startswith(private) and not seg.startswith("out:")) for c in program.calls]


def workload_rows(programs: list[ProgramSpec]) -> list[Row]:
    calls = [c for p in programs for c in p.calls]
    rows = [
        Row.of("calls/program", [len(p.calls) for p in programs]),
        Row.of("threads/program", [p.num_threads for p in programs]),
        Row.of("context tokens/call", [c.prompt_tokens for c in calls]),
        Row.of("new prompt tokens/call", [n for p in programs for n in new_prompt_tokens(p)]),
        Row.of("cross-program shared tokens/call", [n for p in programs for n in shared_prompt_tokens(p)]),
        Row.of("output tokens/call", [c.output_tokens for c in calls]),
        Row.of("max context tokens/program", [max(c.prompt_tokens + c.output_tokens for c in p.calls) for p in programs]),
        Row.of("output tokens/program", [p.output_tokens for p in programs]),
    ]
    delays = [c.delay_s for c in calls if c.depends_on]
    if any(delays):
        rows.append(Row.of("tool pause s/call", delays))
    return rows
