"""Incremental construction of one `ProgramSpec`: numbered call ids and private segment ids."""

from __future__ import annotations

from loadgen.workloads.spec import CallSpec, ProgramSpec
from shared.core.program import ROOT_THREAD
from shared.engine.api import Segment, output_segment_id


class ProgramBuilder:
    def __init__(self, program_id: str, workload: str, tenant: str = "default") -> None:
        self.program_id = program_id
        self.workload = workload
        self.tenant = tenant
        self._calls: list[CallSpec] = []
        self._num_segments = 0

    def segment(self, kind: str, tokens: int) -> Segment:
        """New content private to this program (no other program shares its KV)."""
        self._num_segments += 1
        return (f"{self.program_id}:{kind}{self._num_segments}", tokens)

    def call(
        self,
        prompt_segments: tuple[Segment, ...],
        output_tokens: int,
        depends_on: tuple[str, ...] = (),
        thread_id: str = ROOT_THREAD,
        parent_thread_id: str | None = None,
        delay_s: float = 0.0,
        tool: str | None = None,
    ) -> CallSpec:
        spec = CallSpec(
            call_id=f"{self.program_id}/c{len(self._calls)}",
            thread_id=thread_id,
            parent_thread_id=parent_thread_id,
            depends_on=depends_on,
            delay_s=delay_s,
            prompt_segments=prompt_segments,
            output_tokens=output_tokens,
            tool=tool,
        )
        self._calls.append(spec)
        return spec

    @staticmethod
    def output_segment(spec: CallSpec) -> Segment:
        """The call's generated tokens as a segment, for the histories of later calls."""
        return (output_segment_id(spec.call_id), spec.output_tokens)

    def build(self) -> ProgramSpec:
        return ProgramSpec(self.program_id, self.workload, tuple(self._calls), tenant=self.tenant)
