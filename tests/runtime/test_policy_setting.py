"""One setting decides the policy of the mesh: the engines order by SCHEDULING_POLICY and the
process table folds service the way that policy does; a DEFAULT_AGGREGATION that says otherwise,
an unknown policy, or a policy that cannot run live is refused at start with the variable's name."""

import pytest
from pydantic import ValidationError

from services.engine_agent.settings import EngineAgentSettings
from services.process_table.settings import ProcessTableSettings
from shared.core.program import ServiceAggregation

DB = "postgresql://autellix@127.0.0.1:5432/autellix"


@pytest.mark.parametrize(("policy", "aggregation"), [
    ("atlas", ServiceAggregation.CRITICAL_PATH), ("plas", ServiceAggregation.SUM),
    ("serpt", ServiceAggregation.SUM), ("fcfs", ServiceAggregation.SUM)])
def test_the_table_folds_service_as_the_engines_policy_does(policy, aggregation):
    assert ProcessTableSettings(database_url=DB, scheduling_policy=policy).aggregation is aggregation
    assert EngineAgentSettings(scheduling_policy=policy).scheduling_policy.value == policy


def test_both_read_the_same_variable_with_the_same_default(monkeypatch):
    assert ProcessTableSettings(database_url=DB).scheduling_policy is EngineAgentSettings().scheduling_policy
    monkeypatch.setenv("SCHEDULING_POLICY", "plas")
    assert ProcessTableSettings(database_url=DB).aggregation is ServiceAggregation.SUM
    assert EngineAgentSettings().scheduling_policy.value == "plas"


def test_an_aggregation_that_contradicts_the_policy_is_refused():
    with pytest.raises(ValidationError, match="DEFAULT_AGGREGATION=sum contradicts SCHEDULING_POLICY=atlas"):
        ProcessTableSettings(database_url=DB, scheduling_policy="atlas", default_aggregation="sum")
    assert ProcessTableSettings(database_url=DB, scheduling_policy="plas", default_aggregation="sum")


@pytest.mark.parametrize("settings", [EngineAgentSettings, lambda **kw: ProcessTableSettings(database_url=DB, **kw)])
def test_unknown_and_simulator_only_policies_are_refused(settings):
    with pytest.raises(ValidationError, match="unknown policy 'lifo'; valid policies: fcfs, mlfq, plas, atlas"):
        settings(scheduling_policy="lifo")
    with pytest.raises(ValidationError, match="only the simulator knows"):
        settings(scheduling_policy="srpt")
