"""Writing a result file: every bench and simulation writes its JSON here, so each file is valid JSON
(a figure that could not be computed, NaN or infinite, is written as null) in one layout."""

from __future__ import annotations

import json
import math
from pathlib import Path


def finite(o: object) -> object:
    """JSON has no NaN or infinity: write null."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [finite(v) for v in o]
    return o


def write_json(path: Path | str | None, result: object) -> None:
    """Write `result` to `path` (its folder made if need be); nothing when `path` is empty."""
    if path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(finite(result), indent=1, allow_nan=False) + "\n")
