"""Typed dataclass <-> plain msgpack-ready map, with validation on the way in.

Every message type is a dataclass registered with `@message("type.name")`. Fields are encoded by
name (a map), so adding a field (always with a default) never breaks an older reader; unknown
fields are ignored for the same reason. Decoding checks every field against its annotation and
raises `ProtocolError` with the field's path, so a handler never sees a half-valid message.

Supported field types: str, int, float, bool, bytes, X | None, list[X], tuple[X, Y], dict[str, X]
and nested `@message`-free dataclasses declared with `@wire_struct`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from shared.protocol import bounds
from shared.protocol.errors import ProtocolError

T = TypeVar("T")

Converter = Callable[[Any, str], Any]

# type name -> message class; filled by @message at import time of shared.protocol.messages
MESSAGE_TYPES: dict[str, type] = {}
_STRUCT_DECODERS: dict[type, Converter] = {}
_STRUCT_ENCODERS: dict[type, Callable[[Any], dict]] = {}
_BOUND_CHECKS: dict[type, Callable[[Any], bool]] = {}


def _fail(path: str, want: str, value: Any) -> typing.NoReturn:
    raise ProtocolError(f"field {path!r}: expected {want}, got {type(value).__name__} {value!r:.60}")


def _conv_str(v: Any, path: str) -> str:
    if type(v) is str:
        return v
    _fail(path, "str", v)


def _conv_int(v: Any, path: str) -> int:
    if type(v) is int:
        return v
    _fail(path, "int", v)


def _conv_float(v: Any, path: str) -> float:
    if type(v) is float:
        return v
    if type(v) is int:  # an int on the wire is a valid float (another encoder may write 0 for 0.0)
        return float(v)
    _fail(path, "float", v)


def _conv_bool(v: Any, path: str) -> bool:
    if type(v) is bool:
        return v
    _fail(path, "bool", v)


def _conv_bytes(v: Any, path: str) -> bytes:
    if type(v) is bytes:
        return v
    _fail(path, "bytes", v)


_SCALARS: dict[Any, Converter] = {str: _conv_str, int: _conv_int, float: _conv_float, bool: _conv_bool,
                                  bytes: _conv_bytes}


def _converter_for(tp: Any) -> Converter:
    if tp in _SCALARS:
        return _SCALARS[tp]
    if tp is Any:
        return lambda v, path: v
    if dataclasses.is_dataclass(tp):
        return lambda v, path: _decode_struct(tp, v, path)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"only X | None unions are supported, got {tp}")
        conv = _converter_for(inner[0])
        return lambda v, path: None if v is None else conv(v, path)
    # Lists and tuples: elements that already have their exact scalar type are taken as they are,
    # and element paths (`field[3]`) are formatted only to report an error: a first pass converts
    # without them, and on failure a second pass finds the element and raises with its path.
    if origin is list:
        conv = _converter_for(args[0])
        elem_type = args[0] if args[0] in _SCALARS else None

        def list_conv(v: Any, path: str) -> list:
            if type(v) is not list:
                _fail(path, "list", v)
            if elem_type is not None and all(type(x) is elem_type for x in v):
                return list(v)
            try:
                return [conv(x, path) for x in v]
            except ProtocolError:
                return [conv(x, f"{path}[{i}]") for i, x in enumerate(v)]
        return list_conv
    if origin is tuple:
        convs = [_converter_for(a) for a in args]
        elem_types = tuple(args) if all(a in _SCALARS for a in args) else None

        def tuple_conv(v: Any, path: str) -> tuple:
            if type(v) not in (list, tuple) or len(v) != len(convs):
                _fail(path, f"array of {len(convs)}", v)
            if elem_types is not None and all(type(x) is t for x, t in zip(v, elem_types, strict=True)):
                return tuple(v)
            return tuple(c(x, f"{path}[{i}]") for i, (c, x) in enumerate(zip(convs, v, strict=True)))
        return tuple_conv
    if origin is dict:
        kconv, vconv = _converter_for(args[0]), _converter_for(args[1])

        def dict_conv(v: Any, path: str) -> dict:
            if type(v) is not dict:
                _fail(path, "map", v)
            return {kconv(k, f"{path}.<key>"): vconv(x, f"{path}.{k}") for k, x in v.items()}
        return dict_conv
    raise TypeError(f"unsupported wire field type {tp!r}")


_ABSENT = object()  # a field not on the wire (None is a valid value)


def _bounded_values(conv: Converter, name: str, value_type: type) -> Converter:
    """A map field's converter that also bounds each value as the field itself (bounds.py)."""
    def dict_conv(v: Any, path: str) -> dict:
        out = conv(v, path)
        for key, x in (out or {}).items():
            problem = bounds.problem(name, value_type, x)
            if problem:
                raise ProtocolError(f"field {path + '.' + str(key)!r}: {problem}, got {x!r:.60}")
        return out
    return dict_conv


def _map_type(tp: Any) -> Any:
    """dict[K, V] for a field of type dict[K, V] or dict[K, V] | None; None otherwise."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else None
    return tp if typing.get_origin(tp) is dict else None


def _out_of_bounds(path: str, name: str, scalar: type, value: Any) -> typing.NoReturn:
    raise ProtocolError(f"field {path!r}: {bounds.problem(name, scalar, value)}, got {value!r:.60}")


def _compile(cls: type) -> None:
    hints = typing.get_type_hints(cls)
    # (name, converter, required, exact scalar type or None, bound of a number, is an id): a value
    # of exactly the scalar type is taken without a call (the hot path of a 20K msg/s consumer),
    # then compared with its bound inline (bounds.py: finite floats in range, ids of bounded length)
    specs = []
    nested = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        scalar = tp if tp in _SCALARS else None
        if scalar is None:
            inner = [a for a in typing.get_args(tp) if a is not type(None)]
            if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(inner) == 1 and inner[0] in _SCALARS:
                scalar = inner[0]
        conv = _converter_for(tp)
        map_tp = _map_type(tp)
        map_args = typing.get_args(map_tp) if map_tp is not None else ()
        if map_args and map_args[1] in (float, int):
            conv = _bounded_values(conv, f.name, map_args[1])
        bound = bounds.number_bound(f.name, scalar)
        specs.append((f.name, conv, required, scalar, bound, scalar is str and bounds.is_id(f.name)))
        if dataclasses.is_dataclass(tp) or _has_struct(tp):
            nested.append(f.name)
    names = [name for name, *_ in specs]

    def decode(v: Any, path: str) -> Any:
        if type(v) is not dict:
            _fail(path or cls.__name__, "map", v)
        prefix = path + "." if path else ""
        kwargs = {}
        for name, conv, required, scalar, bound, is_id in specs:
            x = v.get(name, _ABSENT)
            if x is not _ABSENT:
                if type(x) is not scalar:
                    x = conv(x, prefix + name)
                if x is not None:
                    if bound is not None:
                        if not bound[0] <= x <= bound[1]:  # NaN fails every comparison
                            _out_of_bounds(prefix + name, name, scalar, x)
                    elif is_id and bounds.bad_id(name, x):
                        _out_of_bounds(prefix + name, name, scalar, x)
                kwargs[name] = x
            elif required:
                raise ProtocolError(f"{cls.__name__}: missing required field {prefix + name!r}")
        return cls(**kwargs)

    checked = [(name, scalar) for name, _, _, scalar, bound, is_id in specs if bound or is_id]
    mapped = [(f.name, typing.get_args(_map_type(hints[f.name]))[1]) for f in dataclasses.fields(cls)
              if _map_type(hints[f.name]) is not None and typing.get_args(_map_type(hints[f.name]))[1] in (float, int)]

    def in_bounds(obj: Any) -> bool:  # for a decoder that built `obj` itself (FastDecoder)
        for name, scalar in checked:
            x = getattr(obj, name)
            if x is not None and bounds.problem(name, scalar, x):
                return False
        return not any(bounds.problem(name, value_type, x) for name, value_type in mapped
                       for x in (getattr(obj, name) or {}).values())

    _BOUND_CHECKS[cls] = in_bounds

    def encode(obj: Any) -> dict:
        out = {name: getattr(obj, name) for name in names}
        for name in nested:
            out[name] = _to_wire(out[name])
        return out

    _STRUCT_DECODERS[cls] = decode
    _STRUCT_ENCODERS[cls] = encode


def _has_struct(tp: Any) -> bool:
    return any(dataclasses.is_dataclass(a) or _has_struct(a) for a in typing.get_args(tp))


def _to_wire(v: Any) -> Any:
    if dataclasses.is_dataclass(v):
        return _STRUCT_ENCODERS[type(v)](v)
    if isinstance(v, list | tuple):
        return [_to_wire(x) for x in v]
    if isinstance(v, dict):
        return {k: _to_wire(x) for k, x in v.items()}
    return v


def _decode_struct(cls: type, v: Any, path: str) -> Any:
    return _STRUCT_DECODERS[cls](v, path)


def within_bounds(obj: Any) -> bool:
    """Whether every field of a message built without `from_map` lies in its bounds (bounds.py);
    nested structs are not walked (the fast decoders take flat messages)."""
    return _BOUND_CHECKS[type(obj)](obj)


def wire_struct(cls: type[T]) -> type[T]:
    """Register a dataclass nested inside messages (e.g. one waiting call of a queue snapshot)."""
    _compile(cls)
    return cls


def message(type_name: str) -> Callable[[type[T]], type[T]]:
    """Register a top-level message type under its wire name."""

    def register(cls: type[T]) -> type[T]:
        if type_name in MESSAGE_TYPES:
            raise TypeError(f"message type {type_name!r} registered twice")
        cls.TYPE = type_name  # type: ignore[attr-defined]
        MESSAGE_TYPES[type_name] = cls
        _compile(cls)
        return cls
    return register


def to_map(obj: Any) -> dict:
    """A registered dataclass as a plain map of its named fields."""
    try:
        return _STRUCT_ENCODERS[type(obj)](obj)
    except KeyError:
        raise TypeError(f"{type(obj).__name__} is not a registered wire type") from None


def from_map(type_name: str, body: Any) -> Any:
    """Build the message registered as `type_name` from its map, validating every field."""
    cls = MESSAGE_TYPES.get(type_name)
    if cls is None:
        raise ProtocolError(f"unknown message type {type_name!r}")
    return _STRUCT_DECODERS[cls](body, "")
