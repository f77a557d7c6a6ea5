"""Structural checks on a `ProgramSpec` (used by tests and available to drivers).

A valid program: unique call ids in a topological order (every dependency is an earlier call);
every thread but the root is forked (its first call names a parent thread that exists) and
reaches the root through its parents; every earlier output a prompt repeats belongs to a call it
(transitively) depends on, so no call reads an output that might not exist yet; a segment id
always has the same size; token counts and pauses are sane.
"""

from __future__ import annotations

from loadgen.workloads.spec import ProgramSpec
from shared.engine.api import output_segment_id


def validate_program(program: ProgramSpec) -> None:
    """Raise ValueError naming the first violation."""
    pid = program.program_id
    if not program.calls:
        raise ValueError(f"{pid}: no calls")
    ancestors: dict[str, frozenset[str]] = {}
    output_of = {output_segment_id(c.call_id): c.call_id for c in program.calls}
    thread_parent: dict[str, str | None] = {}
    segment_tokens: dict[str, int] = {}
    for call in program.calls:
        cid = call.call_id
        if cid in ancestors:
            raise ValueError(f"{pid}: duplicate call id {cid}")
        if call.output_tokens < 1 or call.prompt_tokens < 1:
            raise ValueError(f"{pid}: {cid} has no prompt or no output tokens")
        if not call.delay_s >= 0:
            raise ValueError(f"{pid}: {cid} has a negative or NaN delay {call.delay_s}")
        reach: set[str] = set()
        for dep in call.depends_on:
            if dep not in ancestors:
                raise ValueError(f"{pid}: {cid} depends on {dep}, which is not an earlier call")
            reach.add(dep)
            reach |= ancestors[dep]
        ancestors[cid] = frozenset(reach)
        for seg_id, tokens in call.prompt_segments:
            if tokens < 1:
                raise ValueError(f"{pid}: {cid} has an empty segment {seg_id}")
            if segment_tokens.setdefault(seg_id, tokens) != tokens:
                raise ValueError(f"{pid}: segment {seg_id} has two sizes")
            source = output_of.get(seg_id)
            if source is not None and source not in reach:
                raise ValueError(f"{pid}: {cid} reads the output of {source} without depending on it")
        if call.thread_id not in thread_parent:
            thread_parent[call.thread_id] = call.parent_thread_id
            if call.parent_thread_id is not None and call.parent_thread_id == call.thread_id:
                raise ValueError(f"{pid}: thread {call.thread_id} forks from itself")
        elif call.parent_thread_id is not None:
            raise ValueError(f"{pid}: {cid} sets parent_thread_id on a thread that already started")
    roots = [t for t, parent in thread_parent.items() if parent is None]
    if len(roots) != 1:
        raise ValueError(f"{pid}: expected one root thread, found {sorted(roots)}")
    for thread in thread_parent:
        seen = {thread}
        while (parent := thread_parent[thread]) is not None:
            if parent not in thread_parent:
                raise ValueError(f"{pid}: thread {thread} forks from unknown thread {parent}")
            if parent in seen:
                raise ValueError(f"{pid}: thread fork cycle through {parent}")
            seen.add(parent)
            thread = parent
