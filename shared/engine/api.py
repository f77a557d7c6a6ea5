"""The contract between engines (lite, emulated vLLM, real vLLM) and their drivers.

Drivers are the offline simulator and the engine agent service. An engine is stepped by its
driver: `step(now_s)` plans and "runs" one batch and returns a report whose `duration_s` is the
modeled (or measured) step time; completions in the report happen at `now_s + duration_s`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from shared.core.program import ProgramLedger
from shared.engine.capabilities import Capability

# A prompt is a concatenation of content segments: (segment id, tokens). Equal segment ids mean
# equal tokens, so two prompts that start with the same segments share a KV prefix. A program's
# growing history is expressed by repeating its earlier segments (including earlier outputs, whose
# segment id is `output_segment_id(call_id)`).
Segment = tuple[str, int]


def output_segment_id(call_id: str) -> str:
    return f"out:{call_id}"


@dataclass
class EngineCall:
    call_id: str
    program_id: str
    thread_id: str
    prompt_segments: tuple[Segment, ...]
    max_output_tokens: int  # the call generates exactly this many tokens (ignore_eos), as in the paper
    arrival_s: float  # submit time on the driver's clock
    program_arrival_s: float
    seq: int  # driver-wide submission order (deterministic ties)
    oracle_remaining_s: float = 0.0  # SRPT oracle only: the program's remaining service estimate
    expected_remaining_s: float | None = None  # SERPT: learned estimate at submit (None: none yet)
    tenant: str = ""  # whose fair share the call counts against ("": none known)

    @property
    def prompt_tokens(self) -> int:
        return sum(n for _, n in self.prompt_segments)


@dataclass
class CallCompletion:
    call_id: str
    program_id: str
    thread_id: str
    service_s: float  # engine time while in the running batch
    wait_s: float  # time queued in this engine (not running)
    preemptions: int
    prompt_tokens: int
    output_tokens: int
    prefix_hit_tokens: int  # prompt tokens served from the prefix cache at first admission
    recomputed_tokens: int  # tokens recomputed after preemptions
    first_token_s: float  # absolute time of the first generated token
    finish_s: float  # absolute time of completion
    # for ATLAS accounting in the process table; None: not known here (it takes its own)
    thread_service_at_submit_s: float | None
    submit_epoch: int  # program ledger epoch at submit (promotion resets invalidate the base)


@dataclass
class StepReport:
    duration_s: float
    num_scheduled_tokens: int
    num_running: int  # calls in the batch this step
    num_waiting: int  # calls queued after planning this step
    kv_used_blocks: int
    kv_total_blocks: int
    tokens_emitted: dict[str, int] = field(default_factory=dict)  # call id -> tokens generated this step
    finished: list[CallCompletion] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    promoted_programs: list[str] = field(default_factory=list)


class ProgramDirectory(Protocol):
    """Where an engine reads program state (S_p, W_p, s_T). The simulator owns one shared dict;
    an engine agent keeps a read-only cache fed by program-service updates from the process table."""

    def ledger(self, program_id: str) -> ProgramLedger: ...


@runtime_checkable
class PromotingDirectory(ProgramDirectory, Protocol):
    """A directory that owns program state and may apply a promotion: the simulator's table, for an
    engine given engine-local anti-starvation. An engine in the mesh takes promotions from the
    process table's updates instead (its directory is read-only)."""

    def promote(self, program_id: str) -> None: ...


class Engine(Protocol):
    engine_id: str

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What it can do beyond this protocol (`shared/engine/capabilities.py`)."""

    def submit(self, call: EngineCall, now_s: float) -> None: ...

    def step(self, now_s: float) -> StepReport | None:
        """Plan and run one batch; None when there is nothing to run."""

    def abort(self, call_id: str) -> bool: ...

    def has_work(self) -> bool: ...

    def load(self) -> float:
        """Queued plus running work, for least-loaded routing (tokens still to process)."""

    def primary_hit_tokens(self, prompt_segments: tuple[Segment, ...]) -> int:
        """How many prompt tokens this engine's prefix cache holds right now (routing hint)."""

    def set_tenant_ranks(self, ranks: Mapping[str, int] | None, tenant_of: Mapping[str, str],
                         missing_rank: int | None = None) -> None:
        """The tenants' order (0 = capacity first) ahead of the policy key; a call's tenant is its
        own (`EngineCall.tenant`), else its program's in `tenant_of`; a tenant not ranked gets
        `missing_rank` (None: behind every ranked one)."""


@dataclass
class DictProgramDirectory:
    """In-memory directory: the simulator's global process table."""

    ledgers: dict[str, ProgramLedger] = field(default_factory=dict)

    def ledger(self, program_id: str) -> ProgramLedger:
        led = self.ledgers.get(program_id)
        if led is None:
            led = self.ledgers[program_id] = ProgramLedger(program_id)
        return led

    def promote(self, program_id: str) -> None:
        self.ledger(program_id).promote()
