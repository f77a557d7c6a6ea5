"""The one scheduling-policy setting of the mesh: `SCHEDULING_POLICY`, read by the engines (their
queue order) and by the process table (how it folds a program's service, the policy's own
aggregation), so the two can never disagree. `DEFAULT_POLICY` is chosen by the simulator's
results (docs/results/serpt/README.md): SERPT was never below FCFS's max rate in any regime tried
(8 runs: 1.00-1.14x, p99 at FCFS's capacity never worse), where ATLAS fell to 0.86x on map-reduce.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from shared.core.policies import registry
from shared.core.policy import PolicyName, parse_policy

DEFAULT_POLICY = PolicyName.SERPT


def _parse(value: object) -> object:
    policy = parse_policy(value) if isinstance(value, str) else value
    if "oracle_remaining_s" in registry.get(policy).inputs:
        raise ValueError(f"{policy} orders by each program's future service, which only the simulator knows; "
                         "serpt learns it from finished programs and runs live")
    return policy


PolicySetting = Annotated[PolicyName, BeforeValidator(_parse)]
