"""Typed dataclass <-> msgpack, on msgspec, with validation and wire bounds on the way in.

Every message type is a `Message` dataclass declared with `@message("type.name")`. Fields are encoded by
name (a map), so adding a field (always with a default) never breaks an older reader; unknown
fields are ignored for the same reason. msgspec checks every field against its annotation in C
(an int is a valid float; a bool is not an int); then every number and id is held to its bound
(bound_check.py, by the rules of bounds.py). Either failure raises `ProtocolError` with the
field's path, so a handler never sees a half-valid message.

Supported field types: str, int, float, bool, bytes, X | None, list[X], tuple[X, Y], dict[str, X]
and nested `@message`-free dataclasses declared with `@wire_struct`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import msgspec

from shared.protocol.errors import ProtocolError

T = TypeVar("T")

# type name -> message class; filled by @message at import time of shared.protocol.messages
MESSAGE_TYPES: dict[str, type] = {}
_STRUCTS: set[type] = set()  # every registered dataclass, messages and nested structs

# every registered class: keyword-only fields (so a default may precede a required one) and no
# per-instance dict
_wire = dataclasses.dataclass(kw_only=True, slots=True)


class Message:
    """Base of every top-level message; `TYPE` is its wire name, set by `@message`."""
    __slots__ = ()
    TYPE: ClassVar[str]


def message_base(cls: type[T]) -> type[T]:
    """Declare the fields several messages share, first on the wire; a base is never sent itself."""
    return _wire(cls)


def wire_struct(cls: type[T]) -> type[T]:
    """Declare and register a dataclass nested inside messages (e.g. one waiting call of a queue
    snapshot)."""
    cls = _wire(cls)
    _STRUCTS.add(cls)
    return cls


def message(type_name: str) -> Callable[[type[T]], type[T]]:
    """Declare a top-level message type (a `Message` subclass) and register it under its wire name."""

    def register(cls: type[T]) -> type[T]:
        if type_name in MESSAGE_TYPES:
            raise TypeError(f"message type {type_name!r} registered twice")
        cls = _wire(cls)
        cls.TYPE = type_name  # type: ignore[attr-defined]
        MESSAGE_TYPES[type_name] = cls
        _STRUCTS.add(cls)
        return cls
    return register


# --- errors ------------------------------------------------------------------------------------
_MSGSPEC_NAMES = {"object": "map", "array": "list"}
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]+)`(?:[^,]*)?, got `(?P<got>[^`]+)`(?: - at `\$(?P<path>[^`]*)`)?")
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]+)`(?: - at `\$(?P<path>[^`]*)`)?")


def _field_path(path: str) -> str:
    """msgspec's `$.waiting[0].program_id` (relative to where decoding began) as `waiting[0].program_id`."""
    return path[1:] if path.startswith(".") else path


def protocol_error(exc: msgspec.MsgspecError, what: str = "") -> ProtocolError:
    """A msgspec validation error in this codec's words (`field 'x': expected str, got int`)."""
    text = str(exc)
    missing = _MISSING.match(text)
    if missing:
        where = _field_path(missing["path"] or "")
        name = f"{where}.{missing['name']}" if where else missing["name"]
        return ProtocolError(f"{what + ': ' if what else ''}missing required field {name!r}")
    expected = _EXPECTED.match(text)
    if expected:
        want = _MSGSPEC_NAMES.get(expected["want"], expected["want"])
        got = _MSGSPEC_NAMES.get(expected["got"], expected["got"])
        where = _field_path(expected["path"] or "")
        if not where:
            return ProtocolError(f"{what or 'message'}: expected {want}, got {got}")
        return ProtocolError(f"field {where!r}: expected {want}, got {got}")
    return ProtocolError(f"{what + ': ' if what else ''}{text}")


# --- maps --------------------------------------------------------------------------------------
def to_map(obj: Any) -> dict:
    """A registered dataclass as a plain map of its named fields (nested structs as maps)."""
    if type(obj) not in _STRUCTS:
        raise TypeError(f"{type(obj).__name__} is not a registered wire type")
    return msgspec.to_builtins(obj, builtin_types=(bytes,))
