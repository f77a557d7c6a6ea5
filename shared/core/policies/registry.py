"""The policies Autellix knows, by name. A new policy is one file in this package and one line
in BUILTIN; nothing else in the tree names a policy to decide behaviour."""

from __future__ import annotations

from shared.core.policies.atlas import Atlas
from shared.core.policies.base import INPUTS, Policy
from shared.core.policies.fcfs import Fcfs
from shared.core.policies.gittins import Gittins
from shared.core.policies.mlfq import Mlfq
from shared.core.policies.plas import Plas
from shared.core.policies.serpt import Serpt
from shared.core.policies.srpt import Srpt
from shared.core.size_estimator import RANKS

BUILTIN: tuple[Policy, ...] = (
    Fcfs(),
    Mlfq(),
    Plas(),
    Atlas(),
    Srpt(),
    Serpt(),
    Gittins(),
)
_POLICIES: dict[str, Policy] = {}


def register(policy: Policy) -> Policy:
    """Add a policy (the built-ins at import; a plug-in from outside the tree at its own import)."""
    name = getattr(policy, "name", "")
    if not name or name != name.strip().lower():
        raise ValueError(f"a policy's name must be non-empty lower-case, got {name!r}")
    if name in _POLICIES:
        raise ValueError(f"policy {name!r} is already registered")
    unknown = sorted(set(policy.inputs) - set(INPUTS))
    if unknown:
        raise ValueError(f"policy {name!r} asks for unknown inputs {unknown}; known: {list(INPUTS)}")
    if policy.size_rank not in RANKS:
        raise ValueError(f"policy {name!r} asks for unknown size rank {policy.size_rank!r}; known: {list(RANKS)}")
    _POLICIES[name] = policy
    return policy


def unregister(name: str) -> None:
    """Remove a plug-in (tests); the built-ins stay."""
    if any(p.name == name for p in BUILTIN):
        raise ValueError(f"policy {name!r} is built in")
    _POLICIES.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_POLICIES)


def get(name: str) -> Policy:
    policy = _POLICIES.get(str(name).strip().lower())
    if policy is None:
        raise ValueError(f"unknown policy {name!r}; valid policies: {', '.join(_POLICIES)}")
    return policy


for _policy in BUILTIN:
    register(_policy)
