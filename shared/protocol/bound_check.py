"""Every field of a decoded message held to its bound (bounds.py), by a checker made once per class.

Every message every service receives passes through here, so each class gets a function written
for its own fields (straight-line comparisons, no loop over a field table): about half the cost of
a generic loop per message. `bounds.problem` words a refusal, so the checker only finds the field.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any

from shared.protocol import bounds
from shared.protocol.errors import ProtocolError

Checker = Callable[..., None]  # (message, path prefix of its fields = "")


def check_bounds(obj: Any) -> None:
    """Every field of a decoded message in its bounds, or `ProtocolError` naming the first one not."""
    _checker(type(obj))(obj, "")


def bounds_checker(cls: type) -> Checker:
    """`check_bounds` for instances of `cls`, for a reader that keeps one per type."""
    return _checker(cls)


def _optional_inner(tp: Any) -> tuple[Any, bool]:
    """(X, True) for `X | None`; (tp, False) otherwise."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"only X | None unions are supported, got {tp}")
        return inner[0], True
    return tp, False


def _nested_struct(tp: Any) -> tuple[type, bool] | None:
    """(struct class, is a list of them) for a field holding registered dataclasses."""
    if dataclasses.is_dataclass(tp):
        return tp, False
    if typing.get_origin(tp) is list and dataclasses.is_dataclass(typing.get_args(tp)[0]):
        return typing.get_args(tp)[0], True
    return None


def _refuse(path: str, name: str, tp: type, value: Any) -> typing.NoReturn:
    raise ProtocolError(f"field {path!r}: {bounds.problem(name, tp, value)}, got {value!r:.60}")


def _too_many(path: str, count: int) -> typing.NoReturn:
    raise ProtocolError(f"field {path!r}: {count} entries, at most {bounds.MAX_ITEMS}")


def _id_test(name: str) -> str:
    """The condition (on `x`, a str) under which an id field called `name` is out of bounds."""
    test = f"len(x) > {bounds.MAX_ID_CHARS} or '\\x00' in x"
    if name in bounds.NON_EMPTY_ID_NAMES:
        test += " or not x"
    if name in bounds.SUBJECT_ID_NAMES:
        test += " or _not_in_a_token(x) is not None"
    return test


def _field_lines(name: str, hint: Any, env: dict[str, Any]) -> list[str]:
    """Source lines checking field `name` (value in `x`), indented for the checker's body."""
    tp, optional = _optional_inner(hint)
    lines = [f"x = obj.{name}"]
    guard = "x is not None and " if optional else ""
    origin = typing.get_origin(tp)
    if origin in (list, dict):
        lines.append(f"if {guard}len(x) > {bounds.MAX_ITEMS}: _too_many(prefix + {name!r}, len(x))")
    if tp in (float, int):
        lo, hi = bounds.number_bound(name, tp)
        lines.append(f"if {guard}not {lo!r} <= x <= {hi!r}: _refuse(prefix + {name!r}, {name!r}, {tp.__name__}, x)")
    elif tp is str and bounds.is_id(name):
        lines.append(f"if {guard}({_id_test(name)}): _refuse(prefix + {name!r}, {name!r}, str, x)")
    elif origin is dict and typing.get_args(tp)[1] in (float, int):
        value_tp = typing.get_args(tp)[1]
        lo, hi = bounds.number_bound(name, value_tp)
        lines += ["for key, v in (x or {}).items():",
                  f"    if not {lo!r} <= v <= {hi!r}: "
                  f"_refuse(prefix + {name!r} + '.' + key, {name!r}, {value_tp.__name__}, v)"]
    elif (struct := _nested_struct(tp)) is not None:
        cls, is_list = struct
        env[f"_check_{name}"] = cls
        if is_list:
            lines += ["if x is not None:",
                      "    for i, item in enumerate(x):",
                      f"        _checker(_check_{name})(item, prefix + {name!r} + '[' + str(i) + '].')"]
        else:
            lines.append(f"if x is not None: _checker(_check_{name})(x, prefix + {name!r} + '.')")
    return lines if len(lines) > 1 else []


@functools.cache
def _checker(cls: type) -> Checker:
    """The checker of `cls`: each field's test written out in declaration order (the first field
    out of bounds is the one refused, as a reader of the message would expect)."""
    hints = typing.get_type_hints(cls)
    env: dict[str, Any] = {"_refuse": _refuse, "_too_many": _too_many, "_checker": _checker,
                           "_not_in_a_token": bounds.NOT_IN_A_TOKEN.search, "float": float, "int": int, "str": str}
    body = [line for f in dataclasses.fields(cls) for line in _field_lines(f.name, hints[f.name], env)]
    source = "def check(obj, prefix=''):\n" + "".join(f"    {line}\n" for line in body or ["pass"])
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<bound check of {cls.__name__}>", "exec"), env, namespace)  # noqa: S102
    return namespace["check"]
