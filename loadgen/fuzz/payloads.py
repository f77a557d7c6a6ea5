"""Seeded bad payloads for one subject: malformed bytes, out-of-range fields, forged valid messages.

Kinds, and who a consumer may trust them from:
- malformed (`random_bytes`, `truncated`, `wrong_types`): no decoder may accept them, from anyone;
- out of range (`non_finite`, `negative`, `huge`, `bad_ids`): well-typed, but a value the protocol's
  contract excludes (NaN, a negative duration, a count beyond 32 bits, a 300-character or NUL id, a
  program id that is no subject token); a bounded decoder refuses them even from the role allowed
  to publish the subject;
- `forged`: a valid message about a live session or engine (charge it, promote it, close it, drain
  an engine, a 100K-element list), refused only by the server's permissions: sent from the wrong
  roles alone;
- `misattributed`: an engine's valid heartbeat, queue snapshot or completion whose body names
  another engine than its subject (what an engine's own credential could claim about another
  engine): every receiver drops it (shared/protocol/attribution.py), even from the right user.

Every message is built from the message classes themselves (field types and names), so a field
added to shared/protocol/messages/ is fuzzed without a change here.
"""

from __future__ import annotations

import dataclasses
import math
import random
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgpack

from shared.protocol.envelope import SCHEMA_VERSION

MALFORMED = ("random_bytes", "truncated", "wrong_types")
OUT_OF_RANGE = ("non_finite", "negative", "huge", "bad_ids")
FORGED = ("forged",)
MISATTRIBUTED = ("misattributed",)
KINDS = (*MALFORMED, *OUT_OF_RANGE, *FORGED, *MISATTRIBUTED)
ATTRIBUTED = ("EngineHeartbeat", "EngineQueueSnapshot", "CallCompleted")  # the body names its engine
OTHER_ENGINE = "e-misattributed"

# Out of range by the protocol's own contract (messages/, ids.py): every float is a finite,
# non-negative quantity, a duration (`*_s`) below decades; every count fits the table's 32-bit
# columns and an instant (`*_ns`) int64; an id is at most 256 characters without NUL, program and
# session and call ids are non-empty, and ids that name subjects are one subject token.
BAD_IDS = ("x" * 300, "x" * 70_000, "a\x00b")
BAD_SUBJECT_IDS = ("a.b", "*", ">", "a b")
NON_EMPTY_IDS = ("program_id", "session_id", "call_id")
SUBJECT_IDS = ("program_id", "session_id", "engine_id", "primary_engine")
BAD_FLOATS = {"non_finite": (math.nan, math.inf, -math.inf), "negative": (-1.0, -1e12), "huge": (1e308, 1e18)}
BAD_DURATIONS = {**BAD_FLOATS, "huge": (1e308, 1e12)}
BAD_INTS = {"negative": (-1, -(2**31)), "huge": (2**31, 2**40, 2**64 - 1)}
BAD_INSTANTS = {"negative": (-1, -(2**31)), "huge": (2**63, 2**64 - 1)}
HUGE_LIST = 100_000  # elements: ~100-300 KB of msgpack, under the server's payload limit


@dataclass(frozen=True)
class Context:
    """What the forgeries aim at: a live session (its tenant) and a live engine."""
    program_id: str
    tenant: str
    engine_id: str


@dataclass(frozen=True)
class Payload:
    kind: str
    label: str  # what was done, e.g. "CallCompleted.service_s=nan"
    data: bytes


def _is_id(name: str) -> bool:
    return name.endswith("_id") or name in ("tenant", "engine", "primary_engine")


def _unwrap(tp: Any) -> Any:
    """X for `X | None`, else tp."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return inner[0]
    return tp


def _sample(tp: Any, name: str, ctx: Context, rng: random.Random) -> Any:
    """A valid wire value for a field of type `tp` called `name`."""
    tp = _unwrap(tp)
    if dataclasses.is_dataclass(tp):
        return sample_body(tp, ctx, rng)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return [_sample(args[0], name, ctx, rng)]
    if origin is tuple:
        return [_sample(a, name, ctx, rng) for a in args]
    if origin is dict:
        return {"main": _sample(args[1], name, ctx, rng)}
    if tp is str:
        by_name = {"program_id": ctx.program_id, "session_id": ctx.program_id, "tenant": ctx.tenant,
                   "engine_id": ctx.engine_id, "thread_id": "main", "reply_subject": "_INBOX.fuzz.reply",
                   "call_id": f"fz-{rng.getrandbits(48):012x}"}
        return by_name.get(name, "fuzz")
    if tp is bool:
        return False
    if tp is int:
        return 1
    if tp is float:
        return 0.5
    if tp is bytes:
        return b""
    raise TypeError(f"no sample for {tp!r}")


def sample_body(cls: type, ctx: Context, rng: random.Random) -> dict:
    hints = typing.get_type_hints(cls)
    return {f.name: _sample(hints[f.name], f.name, ctx, rng) for f in dataclasses.fields(cls)}


def _leaves(cls: type, prefix: tuple = ()) -> Iterator[tuple[tuple, Any, str]]:
    """(path in the body map, leaf type, field name) of every scalar, list or map field, nested
    structs included (a list of structs through its first element); an optional leaf's type is
    `X | None`'s X, with the name marked `?`."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = _unwrap(hints[f.name])
        optional = tp is not hints[f.name]
        path = (*prefix, f.name)
        if dataclasses.is_dataclass(tp):
            yield from _leaves(tp, path)
            continue
        args = typing.get_args(tp)
        if typing.get_origin(tp) is list and args and dataclasses.is_dataclass(args[0]):
            yield from _leaves(args[0], (*path, 0))
            continue
        yield path, tp, f.name + ("?" if optional else "")


def _set(body: dict, path: tuple, value: Any) -> dict:
    out = _deep_copy(body)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _deep_copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _deep_copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_deep_copy(x) for x in v]
    return v


def envelope(type_name: str, body: Any, seq: int) -> bytes:
    return msgpack.packb({"schema_version": SCHEMA_VERSION, "type": type_name, "publisher_id": "fuzz",
                          "seq": seq, "sent_at_ns": 1, "body": body}, use_bin_type=True)


def _out_of_range(kind: str, tp: Any, name: str) -> tuple[Any, ...]:
    """The bad values of one kind for one field type ((): the kind has none for it)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    name = name.rstrip("?")
    if kind == "bad_ids":
        if tp is not str or not _is_id(name):
            return ()
        return (BAD_IDS + (BAD_SUBJECT_IDS if name in SUBJECT_IDS else ())
                + (("",) if name in NON_EMPTY_IDS else ()))
    floats = BAD_DURATIONS if name.endswith("_s") else BAD_FLOATS
    ints = BAD_INSTANTS if name.endswith("_ns") else BAD_INTS
    if tp is float:
        return floats.get(kind, ())
    if tp is int:
        return ints.get(kind, ())
    if origin is dict and args[1] in (float, int):  # per-thread or per-tenant maps
        return tuple({"main": v} for v in (floats if args[1] is float else ints).get(kind, ()))
    return ()


def _long_lists(cls: type) -> list[tuple[tuple, list]]:
    """Every list field at HUGE_LIST elements: within the protocol (a 100K-token prompt is one), so
    a `forged` payload, trusted from the right role."""
    return [(path, list(range(HUGE_LIST)) if typing.get_args(tp)[0] is int else ["x"] * HUGE_LIST)
            for path, tp, _ in _leaves(cls) if typing.get_origin(tp) is list]


_WRONG = (None, "7", 7, 1.5, True, [], {}, b"\x00")


def _fits(value: Any, tp: Any) -> bool:
    """Whether the codec would take `value` for a field of type `tp` (so it is no wrong type)."""
    origin = typing.get_origin(tp)
    if value is None:
        return False  # for a required leaf (the caller keeps None away from optional ones)
    if tp is float:
        return type(value) in (int, float)
    if origin in (list, tuple):
        return type(value) is list
    if origin is dict:
        return type(value) is dict
    return type(value) is tp


def payloads(cls: type, kind: str, ctx: Context, rng: random.Random, variants: int) -> list[Payload]:
    """Up to `variants` payloads of `kind` for message class `cls` (every bad value of a field kind,
    over randomly chosen fields, for the out-of-range kinds)."""
    name = cls.__name__
    seq = rng.randrange(1, 2**31)
    valid = sample_body(cls, ctx, rng)
    out: list[Payload] = []
    if kind == "random_bytes":
        for _ in range(variants):
            size = rng.choice((0, 1, 2, 8, 64, 512, 4096))
            out.append(Payload(kind, f"{size} random bytes", rng.randbytes(size)))
    elif kind == "truncated":
        whole = envelope(cls.TYPE, valid, seq)
        for _ in range(variants):
            cut = rng.randrange(0, len(whole))
            out.append(Payload(kind, f"{name} cut at {cut}/{len(whole)} bytes", whole[:cut]))
    elif kind == "wrong_types":
        leaves = list(_leaves(cls))
        for _ in range(variants):
            if not leaves or rng.random() < 0.2:  # the envelope or the body itself of the wrong shape
                bad = rng.choice([v for v in _WRONG if type(v) is not dict])
                out.append(Payload(kind, f"{name} body={bad!r:.20}", envelope(cls.TYPE, bad, seq)))
                continue
            path, tp, field_name = rng.choice(leaves)
            bad = rng.choice([v for v in _WRONG if not _fits(v, tp) and not (v is None and field_name.endswith("?"))])
            out.append(Payload(kind, f"{name}.{_dotted(path)}={bad!r:.20}",
                               envelope(cls.TYPE, _set(valid, path, bad), seq)))
    elif kind in OUT_OF_RANGE:
        choices = [(path, value) for path, tp, field_name in _leaves(cls)
                   for value in _out_of_range(kind, tp, field_name)]
        rng.shuffle(choices)
        for path, value in choices[:variants]:
            out.append(Payload(kind, f"{name}.{_dotted(path)}={_show(value)}",
                               envelope(cls.TYPE, _set(valid, path, value), seq)))
    elif kind == "forged":
        out.append(Payload(kind, f"{name} (valid, about {ctx.program_id}/{ctx.engine_id})",
                           envelope(cls.TYPE, valid, seq)))
        for path, value in _long_lists(cls)[:1]:
            out.append(Payload(kind, f"{name}.{_dotted(path)}={_show(value)}", envelope(cls.TYPE, _set(valid, path, value), seq)))
        for path, tp, _ in _leaves(cls):
            if len(out) >= variants:
                break
            if tp is float:  # a charge, a credit, a long wait that earns a promotion
                out.append(Payload(kind, f"{name}.{_dotted(path)}=999", envelope(cls.TYPE, _set(valid, path, 999.0), seq)))
            elif tp is bool:  # drain an engine, end a stream
                out.append(Payload(kind, f"{name}.{_dotted(path)}=True", envelope(cls.TYPE, _set(valid, path, True), seq)))
    elif kind == "misattributed":
        if name in ATTRIBUTED:
            out.append(Payload(kind, f"{name}.engine_id={OTHER_ENGINE}",
                               envelope(cls.TYPE, {**valid, "engine_id": OTHER_ENGINE}, seq)))
    else:
        raise ValueError(f"unknown payload kind {kind!r}; known: {', '.join(KINDS)}")
    return out


def _dotted(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _show(value: Any) -> str:
    if isinstance(value, str | list | dict) and len(value) > 12:
        return f"<{type(value).__name__} of {len(value)}>"
    return repr(value)
