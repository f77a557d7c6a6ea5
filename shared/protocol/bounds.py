"""The range every decoded field must lie in, from its name and type (pure; used by codec.py).

A field that changes state is bounded before it does, whoever sent it (a forged or broken
publisher with the right NATS role included):
- every float is a finite, non-negative quantity below MAX_QUANTITY (tokens, ratios, fractions);
  a duration or amount of service (`*_s`, the messages' naming) lies in 0..MAX_SECONDS;
- every int lies in 0..MAX_INT (counts, tokens, epochs, levels, sequence numbers: the process
  table keeps them in 32-bit columns), an instant (`*_ns`) in 0..MAX_NS;
- an id (`*_id`, `tenant`, `primary_engine`) follows the process table's length and NUL rule (ids.py),
  and one that names a subject (program, session, engine) is one subject token; program, session,
  call and thread ids are never empty (other ids may be: several default to "", and their consumers say
  what empty means).

- every list or map holds at most MAX_ITEMS entries (above any real one: a 128K-token prompt's
  ids, a busy engine's queue), so a forged collection costs its consumer a bounded loop; per-key
  maps (`thread_service_s`) have their values bounded like the field.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_ID_CHARS = 256  # the process table's id rule (ids.py takes it from here: this module is the lower)
MAX_SECONDS = 1e9  # ~31 years of service or waiting: beyond any real program
MAX_QUANTITY = 1e15  # no float on the wire comes near: tokens to process, a wait ratio, a fraction
MAX_INT = 2**31 - 1
MAX_NS = 2**63 - 1
MAX_ITEMS = 1 << 20  # entries of one list or map field

ID_NAMES = ("tenant", "primary_engine")
SUBJECT_ID_NAMES = ("program_id", "session_id", "engine_id", "primary_engine")
NON_EMPTY_ID_NAMES = ("program_id", "session_id", "call_id", "thread_id")  # always given: keys of the table's rows
NOT_IN_A_TOKEN = re.compile(r"[.*>\s]")


def token(value: str) -> str:
    """An id as one subject token; raises ValueError for ids NATS cannot carry in a subject."""
    if not value or NOT_IN_A_TOKEN.search(value):
        raise ValueError(f"{value!r} cannot be used in a NATS subject (empty, or has '.', '*', '>' or space)")
    return value


class Bound(NamedTuple):
    lo: float
    hi: float


def number_bound(name: str, tp: type) -> Bound | None:
    """The closed range of a float or int field called `name` (None: not a number)."""
    if tp is float:
        return Bound(0.0, MAX_SECONDS) if name.endswith("_s") else Bound(0.0, MAX_QUANTITY)
    if tp is int:
        return Bound(0, MAX_NS) if name.endswith("_ns") else Bound(0, MAX_INT)
    return None


def is_id(name: str) -> bool:
    return name.endswith("_id") or name in ID_NAMES


def bad_id(name: str, value: str) -> bool:
    """Too long, with NUL, empty where it is a row's key, or (an id that names a subject) not one
    subject token."""
    return (len(value) > MAX_ID_CHARS or "\x00" in value or (not value and name in NON_EMPTY_ID_NAMES)
            or (name in SUBJECT_ID_NAMES and NOT_IN_A_TOKEN.search(value) is not None))


def problem(name: str, tp: type, value: object) -> str | None:
    """Why `value` (already of type `tp`) is out of bounds for field `name`; None when it is in."""
    bound = number_bound(name, tp)
    if bound is not None:
        if not bound.lo <= value <= bound.hi:  # NaN fails every comparison
            return f"out of range {bound.lo:g}..{bound.hi:g}"
        return None
    if tp is str and is_id(name) and bad_id(name, value):
        return (f"an id is at most {MAX_ID_CHARS} characters, without NUL"
                + (", and one subject token (no '.', '*', '>' or space)" if name in SUBJECT_ID_NAMES else "")
                + (", not empty" if name in NON_EMPTY_ID_NAMES else ""))
    return None
