"""Program metadata carried by a vLLM request in `SamplingParams.extra_args` (pure validation).

Two shapes: in-process drivers give `extra_args = {"autellix": {"program_id": str, ...}}`; over
HTTP vLLM's `vllm_xargs` is flat, so the engine agent sends `{"autellix_program_id": str, ...}`
(`FLAT_PREFIX` + the field name). Other keys belong to vLLM (e.g. `kv_transfer_params`) and are left
alone. A request without our fields is a one-call program (its own id is the program id). A
malformed field of ours is refused at admission with a ValueError that names it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.core.program import ROOT_THREAD
from shared.protocol.ids import MAX_ID_CHARS as _MAX_ID_CHARS
from shared.protocol.ids import id_problem

EXTRA_ARGS_KEY = "autellix"
FLAT_PREFIX = "autellix_"
_STR_FIELDS = ("program_id", "thread_id", "call_id", "tenant")
_FLOAT_FIELDS = ("program_arrival_s", "oracle_remaining_s", "expected_remaining_s")
_INT_FIELDS = ("seq",)
KNOWN_FIELDS = frozenset(_STR_FIELDS + _FLOAT_FIELDS + _INT_FIELDS)


@dataclass(frozen=True)
class ProgramMeta:
    program_id: str
    thread_id: str = ROOT_THREAD
    program_arrival_s: float | None = None  # None: the call's own arrival
    oracle_remaining_s: float = 0.0  # SRPT oracle only
    seq: int | None = None  # driver-wide submission order; None: the engine's own order
    call_id: str | None = None  # the mesh's call id, when vLLM's request id is its own
    expected_remaining_s: float | None = None  # SERPT: the program's learned estimate at submit
    tenant: str = ""  # whose fair share the call counts against ("": none given)


def flat_program_args(program_id: str, thread_id: str, call_id: str, **fields: Any) -> dict:
    """The flat `vllm_xargs` form, for a request that reaches vLLM over its OpenAI app."""
    args = {f"{FLAT_PREFIX}{k}": v for k, v in
            {"program_id": program_id, "thread_id": thread_id, "call_id": call_id, **fields}.items()}
    parse_program_meta(args, request_id="(agent)")
    return args


def program_meta_args(program_id: str, thread_id: str = ROOT_THREAD, **fields: Any) -> dict:
    """The `extra_args` dict a client puts in SamplingParams (validated on the way out too)."""
    args = {EXTRA_ARGS_KEY: {"program_id": program_id, "thread_id": thread_id, **fields}}
    parse_program_meta(args, request_id="(client)")
    return args


def _check_id(name: str, value: Any, request_id: str) -> str:
    if id_problem(value) is not None:
        raise ValueError(f"request {request_id}: extra_args[{EXTRA_ARGS_KEY!r}][{name!r}] must be a "
                         f"non-empty string of at most {_MAX_ID_CHARS} characters without NUL, got {value!r}")
    return value


def _check_float(name: str, value: Any, request_id: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"request {request_id}: extra_args[{EXTRA_ARGS_KEY!r}][{name!r}] must be a "
                         f"finite number >= 0, got {value!r}")
    return float(value)


def parse_program_meta(extra_args: Any, request_id: str) -> ProgramMeta:
    """Validate `extra_args`; None or {} means a one-call program named after the request."""
    if extra_args is None or (isinstance(extra_args, Mapping) and not extra_args):
        return ProgramMeta(program_id=request_id)
    if not isinstance(extra_args, Mapping):
        raise ValueError(f"request {request_id}: extra_args must be a mapping, got {type(extra_args).__name__}")
    flat = {str(k)[len(FLAT_PREFIX):]: v for k, v in extra_args.items() if str(k).startswith(FLAT_PREFIX)}
    if EXTRA_ARGS_KEY not in extra_args and not flat:
        return ProgramMeta(program_id=request_id)  # vLLM's own keys only
    if flat and EXTRA_ARGS_KEY in extra_args:
        raise ValueError(f"request {request_id}: give extra_args[{EXTRA_ARGS_KEY!r}] or "
                         f"{FLAT_PREFIX}* keys, not both")
    meta = extra_args[EXTRA_ARGS_KEY] if EXTRA_ARGS_KEY in extra_args else flat
    if not isinstance(meta, Mapping):
        raise ValueError(f"request {request_id}: extra_args[{EXTRA_ARGS_KEY!r}] must be a mapping with "
                         f"'program_id', got {type(meta).__name__}")
    unknown = sorted(str(k) for k in meta if k not in KNOWN_FIELDS)
    if unknown:
        raise ValueError(f"request {request_id}: unknown fields {unknown} in extra_args[{EXTRA_ARGS_KEY!r}]; "
                         f"known: {sorted(KNOWN_FIELDS)}")
    if "program_id" not in meta:
        raise ValueError(f"request {request_id}: extra_args[{EXTRA_ARGS_KEY!r}] lacks 'program_id'")
    program_id = _check_id("program_id", meta["program_id"], request_id)
    thread_id = _check_id("thread_id", meta.get("thread_id", ROOT_THREAD), request_id)
    arrival = meta.get("program_arrival_s")
    expected = meta.get("expected_remaining_s")
    seq = meta.get("seq")
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 0):
        raise ValueError(f"request {request_id}: extra_args[{EXTRA_ARGS_KEY!r}]['seq'] must be an int >= 0, "
                         f"got {seq!r}")
    return ProgramMeta(
        program_id=program_id,
        thread_id=thread_id,
        program_arrival_s=None if arrival is None else _check_float("program_arrival_s", arrival, request_id),
        oracle_remaining_s=_check_float("oracle_remaining_s", meta.get("oracle_remaining_s", 0.0), request_id),
        expected_remaining_s=None if expected is None else _check_float("expected_remaining_s", expected, request_id),
        seq=seq,
        call_id=None if meta.get("call_id") is None else _check_id("call_id", meta["call_id"], request_id),
        tenant="" if meta.get("tenant") is None else _check_id("tenant", meta["tenant"], request_id),
    )
