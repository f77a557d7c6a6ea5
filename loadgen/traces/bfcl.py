"""BFCL v4 multi-turn function-calling programs from the `bfcl-eval` package's data files.

Install: `bfcl-eval==2026.3.23` declares heavy dependencies (torch via sentence-transformers,
vendor SDKs, a numpy pin), none of which its data files or multi-turn backends need, so install it
with `pip install --no-deps bfcl-eval==2026.3.23`; this reader opens the JSON-lines files under
`bfcl_eval/data/` directly and imports only BFCL's pure-Python backend classes (`bfcl_backend.py`).

One entry (categories multi_turn_base, multi_turn_miss_func, multi_turn_miss_param,
multi_turn_long_context; 200 each) becomes one ReAct program, one thread:
- system segments, shared by every program that has them: BFCL's default system prompt
  (`bfcl:system`) and one segment per involved API class holding its function docs
  (`bfcl:doc:<Class>`, the JSON lines of `multi_turn_func_doc/`, minus excluded functions);
- per user turn, one LLM call per ground-truth function call (the model calls one function per
  step and reads its result), then one call answering the user; a turn with no ground truth
  (missing parameters) is one call, the clarifying question;
- a call's output is the ground-truth call text `[f(a=1)]`; a final answer's output is 34 tokens
  (the paper's BFCL decode mean; the data has no reference answer text);
- a call's new input is the user's message (first call of a turn) or the previous call's result,
  obtained by replaying the ground truth on BFCL's in-memory backends (long-context entries with
  their long scenario data); a function withheld in miss_func arrives with the turn that reveals
  it, as BFCL appends its docs then;
- tool class = the function name (before each call that follows a function result).
Tokens: 4 characters per token (`tokens.py`). Entries are picked with replacement from a seeded
stream, so program i is the same for any run size.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from loadgen.traces.bfcl_backend import BACKEND_MODULES, BackendSession
from loadgen.traces.errors import TraceUnavailable
from loadgen.traces.tokens import estimate_tokens
from loadgen.workloads.builder import ProgramBuilder
from loadgen.workloads.limits import MAX_CONTEXT_TOKENS
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import ToolDelayModel

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
ANSWER_TOKENS = 34
INSTALL_HINT = (
    "install it without its heavy dependencies: .venv/bin/pip install --no-deps bfcl-eval==2026.3.23 "
    "(listed in pyproject's `traces` extra)"
)
DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}

Step = tuple[tuple[tuple[str, int], ...], int, str | None]  # (new segments, output tokens, tool)


@dataclass(frozen=True)
class BfclEntry:
    entry_id: str
    system: tuple[tuple[str, int], ...]  # shared segments (system prompt, class docs)
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class BfclTrace:
    data_dir: str
    entries: tuple[BfclEntry, ...]
    malformed: int
    failed_calls: int  # ground-truth calls whose replay returned an error text

    def summary(self) -> str:
        return (
            f"BFCL {self.data_dir}: {len(self.entries)} multi-turn entries, {self.malformed} malformed lines skipped, "
            f"{self.failed_calls} ground-truth calls replayed with an error result"
        )


def default_data_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise TraceUnavailable(f"the bfcl-trace workload needs the bfcl-eval package; {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _system_prompt_tokens() -> int:
    try:
        from bfcl_eval.constants.default_prompts import _DEFAULT_SYSTEM_PROMPT as text
    except ImportError:  # a different bfcl-eval layout: the v4 prompt is 1,057 chars
        return 265
    return estimate_tokens(text.replace("{functions}", ""))


def _docs(data_dir: Path, class_name: str) -> dict[str, str]:
    lines = (data_dir / "multi_turn_func_doc" / DOC_FILES[class_name]).read_text().splitlines()
    docs = {}
    for line in lines:
        if line.strip():
            docs[json.loads(line)["name"]] = line
    return docs


def _doc_segment(class_name: str, docs: dict[str, str], omit: set[str]) -> tuple[str, int]:
    text = "\n".join(doc for name, doc in docs.items() if name not in omit)
    suffix = f"-without:{','.join(sorted(omit & docs.keys()))}" if omit & docs.keys() else ""
    return (f"bfcl:doc:{class_name}{suffix}", estimate_tokens(text))


def _entry(record: dict, answers: list, data_dir: Path, long_context: bool, system_tokens: int) -> tuple[BfclEntry, int]:
    classes = sorted(record["involved_classes"])
    excluded = set(record.get("excluded_function", []))
    missed = {int(turn): set(names) for turn, names in record.get("missed_function", {}).items()}
    withheld = set().union(*missed.values()) if missed else set()
    docs = {name: _docs(data_dir, name) for name in classes}
    system = (("bfcl:system", system_tokens),) + tuple(_doc_segment(c, docs[c], excluded | withheld) for c in classes)
    backend = BackendSession(classes, record.get("initial_config", {}), long_context)
    steps: list[Step] = []
    failed = 0
    for turn, messages in enumerate(record["question"]):
        text = "\n".join(m.get("content", "") for m in messages)
        new: list[tuple[str, int]] = []
        if turn in missed:
            revealed = "\n".join(docs[c][n] for c in classes for n in missed[turn] if n in docs[c])
            new.append(("doc", estimate_tokens(revealed)))
        if text:
            new.append(("user", estimate_tokens(text)))
        if not new:
            new.append(("user", 1))
        tool = None
        for call in answers[turn] if turn < len(answers) else []:
            steps.append((tuple(new), estimate_tokens(f"[{call}]"), tool))
            result = backend.execute(call)
            failed += result.startswith("Error during execution")
            new = [("obs", estimate_tokens(result))]
            tool = call.split("(", 1)[0].strip()
        steps.append((tuple(new), ANSWER_TOKENS, tool))
    return BfclEntry(record["id"], system, tuple(steps)), failed


@lru_cache(maxsize=4)
def load_bfcl(data_dir: str | None = None, categories: tuple[str, ...] = CATEGORIES) -> BfclTrace:
    root = Path(data_dir) if data_dir else default_data_dir()
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"unknown BFCL categories {unknown}; valid: {', '.join(CATEGORIES)}")
    system_tokens = _system_prompt_tokens()
    entries: list[BfclEntry] = []
    malformed = failed = 0
    for category in categories:
        questions = root / f"BFCL_v4_multi_turn_{category}.json"
        answers_file = root / "possible_answer" / questions.name
        if not questions.is_file() or not answers_file.is_file():
            raise FileNotFoundError(f"BFCL data file missing: {questions} or {answers_file}")
        answers = {}
        for line in answers_file.read_text().splitlines():
            try:
                row = json.loads(line)
                answers[row["id"]] = row["ground_truth"]
            except (json.JSONDecodeError, KeyError, TypeError):
                malformed += bool(line.strip())
        for line in questions.read_text().splitlines():
            try:
                record = json.loads(line)
                entry, bad = _entry(record, answers[record["id"]], root, category == "long_context", system_tokens)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                malformed += bool(line.strip())
                continue
            entries.append(entry)
            failed += bad
    return BfclTrace(str(root), tuple(entries), malformed, failed)


def bfcl_program(program_id: str, entry: BfclEntry, rng: random.Random, tools: ToolDelayModel, workload: str) -> ProgramSpec:
    builder = ProgramBuilder(program_id, workload)
    history: tuple = entry.system
    context_tokens = sum(n for _, n in history)
    previous = None
    for index, (new, output_tokens, tool) in enumerate(entry.steps):
        segments = tuple(builder.segment(kind, tokens) for kind, tokens in new)
        added = sum(n for _, n in segments)
        if index and context_tokens + added + output_tokens > MAX_CONTEXT_TOKENS:
            break
        prompt = history + segments
        spec = builder.call(
            prompt,
            output_tokens,
            depends_on=(previous.call_id,) if previous else (),
            delay_s=tools.delay_s(rng, tool) if tool else 0.0,
            tool=tool,
        )
        history = prompt + (builder.output_segment(spec),)
        context_tokens += added + output_tokens
        previous = spec
    return builder.build()


__all__ = ["BACKEND_MODULES", "BfclTrace", "CATEGORIES", "bfcl_program", "load_bfcl", "make_bfcl_programs"]


def make_bfcl_programs(
    num_programs: int,
    seed: int,
    tool_delays: bool = False,
    path: str | None = None,
    categories: tuple[str, ...] | str = CATEGORIES,
) -> list[ProgramSpec]:
    """Programs replaying BFCL entries picked with replacement from a seeded stream per program."""
    from loadgen.workloads.sampling import program_rng

    if isinstance(categories, str):
        categories = tuple(c.strip() for c in categories.split(",") if c.strip())
    trace = load_bfcl(str(path) if path else None, tuple(categories))
    if num_programs and not trace.entries:
        raise ValueError(f"no usable BFCL entries: {trace.summary()}")
    tools = ToolDelayModel(enabled=bool(tool_delays))
    programs = []
    for i in range(num_programs):
        rng = program_rng("bfcl-trace", seed, i)
        entry = trace.entries[rng.randrange(len(trace.entries))]
        programs.append(bfcl_program(f"bfcl-trace-{i}", entry, rng, tools, "bfcl-trace"))
    return programs
