"""Multi-tenant mix: heavy, medium and light tenants sharing the service (SAGA Table 6's setting).

- heavy tenant: coding agents (`coding.py`: tens of steps, contexts to tens of K tokens);
- medium tenant: browser agents (`browser.py`: ~18 steps, a few K tokens per page);
- light tenant: BFCL-style function-calling tasks (`react.py`: ~11 short calls), with tool
  pauses of median 0.3 s (the generic median) and log-sigma 1.0 (CV 1.31, SAGA's production CV).
`ProgramSpec.tenant` names the tenant (the class, or `<class>-<k>` with several tenants per class)
and `ProgramSpec.workload` the program's generator. Shares are by program count, `heavy:medium:
light` = 1:1:1 by default (assumption; the notes give no shares); programs come in blocks of
sum(shares) in a seeded order, so every prefix of the list keeps the shares. Pauses on by default.
"""

from __future__ import annotations

import dataclasses
import random

from loadgen.workloads.browser import browser_program
from loadgen.workloads.coding import coding_program
from loadgen.workloads.react import TOOL_CLASS as REACT_TOOL
from loadgen.workloads.react import react_program
from loadgen.workloads.sampling import program_rng
from loadgen.workloads.spec import ProgramSpec
from loadgen.workloads.tools import GENERIC_MEDIAN_S, PROFILED_SIGMA, ToolDelayModel, ToolProfile

TENANT_CLASSES = ("heavy", "medium", "light")
GENERATORS = {"heavy": coding_program, "medium": browser_program, "light": react_program}
LIGHT_PROFILES = {REACT_TOOL: ToolProfile(GENERIC_MEDIAN_S, PROFILED_SIGMA)}


def parse_shares(shares: str) -> dict[str, int]:
    parts = [p.strip() for p in str(shares).split(":")]
    if len(parts) != len(TENANT_CLASSES) or not all(p.isdigit() for p in parts) or not any(int(p) for p in parts):
        raise ValueError(f"shares must be three non-negative integers heavy:medium:light, not all 0; got {shares!r}")
    return {cls: int(p) for cls, p in zip(TENANT_CLASSES, parts, strict=True)}


def tenant_class(tenant: str) -> str:
    """The class of a tenant name (`heavy`, `heavy-2` -> `heavy`)."""
    return tenant.split("-", 1)[0]


def multitenant_programs(
    num_programs: int,
    seed: int,
    tool_delays: bool = True,
    shares: str = "1:1:1",
    tenants_per_class: int = 1,
    name: str = "multitenant",
) -> list[ProgramSpec]:
    weights = parse_shares(shares)
    if isinstance(tenants_per_class, bool) or not isinstance(tenants_per_class, int) or tenants_per_class < 1:
        raise ValueError(f"tenants_per_class must be an integer >= 1, got {tenants_per_class!r}")
    block = [cls for cls in TENANT_CLASSES for _ in range(weights[cls])]
    programs = []
    order: list[str] = []
    for i in range(num_programs):
        if i % len(block) == 0:
            order = block[:]
            random.Random(f"{name}/{seed}/block{i // len(block)}").shuffle(order)
        cls = order[i % len(block)]
        rng = program_rng(name, seed, i)
        tenant = cls if tenants_per_class == 1 else f"{cls}-{rng.randrange(tenants_per_class)}"
        tools = ToolDelayModel(bool(tool_delays), LIGHT_PROFILES if cls == "light" else {})
        program = GENERATORS[cls](f"{name}-{i}", rng, tools, workload=GENERATORS[cls].__name__.removesuffix("_program"))
        programs.append(dataclasses.replace(program, tenant=tenant))
    return programs
