"""The engine id an agent takes when ENGINE_ID is not given: its host's name, and the GPU it was
given when CUDA_VISIBLE_DEVICES names exactly one (one agent per GPU: `gpu-node-3-gpu1`).

Both are stable across restarts of the agent on the same host (a StatefulSet pod keeps its name),
so the router and the process table see the same engine come back. Two agents on one host and
one GPU derive the same id: the second refuses to start (unique_id.py) and asks for ENGINE_ID.
Pure: the caller passes the host name and the variable."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")  # subject tokens may not hold '.', '*', '>' or spaces


def host_engine_id(hostname: str, cuda_visible_devices: str | None = None) -> str:
    """`hostname` cut to its first label, lower-cased, made subject-safe; `-gpu<N>` for one GPU."""
    host = _UNSAFE.sub("-", hostname.split(".", 1)[0].strip().lower()).strip("-") or "engine"
    devices = [d.strip() for d in (cuda_visible_devices or "").split(",") if d.strip()]
    if len(devices) == 1:
        host += f"-gpu{_UNSAFE.sub('-', devices[0]).strip('-') or '0'}"
    return host
