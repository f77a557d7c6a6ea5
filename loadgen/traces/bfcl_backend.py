"""Replay BFCL ground-truth function calls on BFCL's own in-memory backends, without `eval`.

BFCL's multi-turn data holds the user turns and the ground-truth calls but not the tool results,
and a result's size is the next call's uncached prefill. BFCL's evaluator gets results by
`eval`-ing the call strings against simulated API classes (file system, trading bot, travel...).
Here each call string is parsed with `ast` and accepted only as `name(literal args)`; the method is
looked up on the instance of the class that owns it and called. Anything else, or any exception,
yields BFCL's own error text, as its evaluator would return to the model.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json

# The multi-turn suite's classes (bfcl_eval.constants.executable_backend_config), minus the
# memory and web-search ones, which need network or embedding models and are not multi-turn data.
BACKEND_PREFIX = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
BACKEND_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
STATELESS = frozenset({"MathAPI"})


class BackendSession:
    """The involved classes of one BFCL entry, loaded with its initial configuration."""

    def __init__(self, involved_classes: list[str], initial_config: dict, long_context: bool) -> None:
        self._owner: dict[str, object] = {}
        for class_name in involved_classes:
            module_name = BACKEND_MODULES.get(class_name)
            if module_name is None:
                raise ValueError(f"unsupported BFCL class {class_name}")
            cls = getattr(importlib.import_module(f"{BACKEND_PREFIX}.{module_name}"), class_name)
            instance = cls()
            if class_name not in STATELESS:
                instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
            for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self._owner[name] = instance

    def execute(self, call: str) -> str:
        try:
            node = ast.parse(call.strip(), mode="eval").body
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                raise ValueError(f"not a plain function call: {call!r}")
            instance = self._owner.get(node.func.id)
            if instance is None:
                raise ValueError(f"unknown function {node.func.id}")
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            result = getattr(instance, node.func.id)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the model sees the error text, as in BFCL
            return f"Error during execution: {exc}"
        if isinstance(result, str):
            return result
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
